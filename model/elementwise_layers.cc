// ReLU, Dropout and Flatten: layers without parameters that act element by
// element (Flatten is a view: the model passes the buffer through).
#include "common/status_macros.h"
#include "compute/kernel_math.h"
#include "model/layer_families.h"

namespace ferry {
namespace {

class ReluLayer final : public Layer {
 public:
  explicit ReluLayer(const SampleShape& in) : size_(ShapeElements(in)) {}

  absl::Status Forward(const LayerContext& ctx, const float* /*params*/,
                       float* /*state*/, const float* x, float* y) override {
    return ctx.backend->Relu(Count(ctx), x, y);
  }
  absl::Status Backward(const LayerContext& ctx, const float* /*params*/,
                        const float* /*x*/, const float* y, const float* dy,
                        float* dx, float* /*dparams*/) override {
    if (dx == nullptr) return absl::OkStatus();
    return ctx.backend->ReluBackward(Count(ctx), y, dy, dx);
  }

 private:
  size_t Count(const LayerContext& ctx) const {
    return static_cast<size_t>(ctx.batch) * size_;
  }
  int64_t size_;
};

// Training: y = x * DropoutFactor(key, row, element) with the key of this
// step (compute/kernel_math.h); the backward pass applies the same factors to
// dy. Evaluation: identity.
class DropoutLayer final : public Layer {
 public:
  DropoutLayer(const LayerDef& def, int index, const SampleShape& in)
      : p_(static_cast<float>(def.p)),
        index_(static_cast<uint32_t>(index)),
        size_(ShapeElements(in)) {}

  absl::Status Forward(const LayerContext& ctx, const float* /*params*/,
                       float* /*state*/, const float* x, float* y) override {
    return Apply(ctx, x, y);
  }
  absl::Status Backward(const LayerContext& ctx, const float* /*params*/,
                        const float* /*x*/, const float* /*y*/, const float* dy,
                        float* dx, float* /*dparams*/) override {
    if (dx == nullptr) return absl::OkStatus();
    return Apply(ctx, dy, dx);
  }

 private:
  absl::Status Apply(const LayerContext& ctx, const float* in, float* out) {
    if (!ctx.training || p_ == 0.0f) {
      return ctx.backend->Copy(in, static_cast<size_t>(ctx.batch) * size_, out);
    }
    DropoutKey key;
    key.seed = ctx.seed;
    key.step = ctx.step;
    key.first_sample = ctx.first_sample;
    key.layer = index_;
    key.p = p_;
    return ctx.backend->Dropout(ctx.batch, size_, key, in, out);
  }

  float p_;
  uint32_t index_;
  int64_t size_;
};

class FlattenLayer final : public Layer {
 public:
  bool IsView() const override { return true; }
  absl::Status Forward(const LayerContext&, const float*, float*, const float*,
                       float*) override {
    return absl::OkStatus();
  }
  absl::Status Backward(const LayerContext&, const float*, const float*,
                        const float*, const float*, float*, float*) override {
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Layer> MakeReluLayer(const SampleShape& in) {
  return std::make_unique<ReluLayer>(in);
}
std::unique_ptr<Layer> MakeDropoutLayer(const LayerDef& def, int index,
                                        const SampleShape& in) {
  return std::make_unique<DropoutLayer>(def, index, in);
}
std::unique_ptr<Layer> MakeFlattenLayer() {
  return std::make_unique<FlattenLayer>();
}

}  // namespace ferry

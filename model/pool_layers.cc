// MaxPool2d and AvgPool2d over NCHW batches (the backend's pooling kernels;
// max pooling recomputes each window's argmax in the backward pass).
#include "common/status_macros.h"
#include "compute/kernel_math.h"
#include "model/layer_families.h"

namespace ferry {
namespace {

class PoolLayer final : public Layer {
 public:
  PoolLayer(const LayerDef& def, const SampleShape& in)
      : max_(def.type == LayerType::kMaxPool2d) {
    g_.channels = static_cast<int>(in[0]);
    g_.height = static_cast<int>(in[1]);
    g_.width = static_cast<int>(in[2]);
    g_.kernel_h = static_cast<int>(def.kernel_size.h);
    g_.kernel_w = static_cast<int>(def.kernel_size.w);
    g_.stride_h = static_cast<int>(def.stride.h);
    g_.stride_w = static_cast<int>(def.stride.w);
    g_.pad_h = static_cast<int>(def.padding.h);
    g_.pad_w = static_cast<int>(def.padding.w);
  }

  absl::Status Forward(const LayerContext& ctx, const float* /*params*/,
                       float* /*state*/, const float* x, float* y) override {
    return max_ ? ctx.backend->MaxPoolForward(ctx.batch, g_, x, y)
                : ctx.backend->AvgPoolForward(ctx.batch, g_, x, y);
  }

  absl::Status Backward(const LayerContext& ctx, const float* /*params*/,
                        const float* x, const float* /*y*/, const float* dy,
                        float* dx, float* /*dparams*/) override {
    if (dx == nullptr) return absl::OkStatus();
    return max_ ? ctx.backend->MaxPoolBackward(ctx.batch, g_, x, dy, dx)
                : ctx.backend->AvgPoolBackward(ctx.batch, g_, dy, dx);
  }

 private:
  bool max_;
  WindowGeometry g_;
};

}  // namespace

std::unique_ptr<Layer> MakePoolLayer(const LayerDef& def,
                                     const SampleShape& in) {
  return std::make_unique<PoolLayer>(def, in);
}

}  // namespace ferry

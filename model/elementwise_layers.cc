// ReLU, Dropout and Flatten: layers without parameters that act element by
// element (Flatten is a view: the model passes the buffer through).
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compute/dropout_ops.h"
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
    ASSIGN_OR_RETURN(DropoutOps * dropout,
                     ctx.backend->LayerOpsOf<DropoutOps>());
    return dropout->Dropout(ctx.batch, size_, key, in, out);
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

absl::Status ParseRelu(LayerArgReader& r, LayerDef& /*d*/) {
  return r.Ignored("inplace");
}

absl::Status ParseDropout(LayerArgReader& r, LayerDef& d) {
  ASSIGN_OR_RETURN(d.p, r.Number("p", 0.5, 0.0, 1.0, true));
  return r.Ignored("inplace");
}

void WriteDropout(const LayerDef& d, LayerArgWriter& w) { w.Number("p", d.p); }

absl::Status ParseFlatten(LayerArgReader& r, LayerDef& /*d*/) {
  RETURN_IF_ERROR(r.OnlyDefault("start_dim", 1));
  return r.OnlyDefault("end_dim", -1);
}

absl::StatusOr<SampleShape> SameShape(const LayerDef& /*d*/,
                                      const SampleShape& in) {
  return in;
}

absl::StatusOr<SampleShape> DropoutOutput(const LayerDef& d,
                                          const SampleShape& in) {
  if (!(d.p >= 0.0 && d.p < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("p must be in [0, 1), got ", d.p));
  }
  return in;
}

absl::StatusOr<SampleShape> FlattenOutput(const LayerDef& /*d*/,
                                          const SampleShape& in) {
  const int64_t n = ShapeElements(in);
  if (n > (int64_t{1} << 31) - 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("output of ", n, " features is too large"));
  }
  return SampleShape{n};
}

absl::StatusOr<std::unique_ptr<Layer>> MakeRelu(const LayerDef& /*def*/,
                                                int /*index*/,
                                                const SampleShape& in,
                                                const SampleShape& /*out*/) {
  return std::make_unique<ReluLayer>(in);
}

absl::StatusOr<std::unique_ptr<Layer>> MakeDropout(const LayerDef& def,
                                                   int index,
                                                   const SampleShape& in,
                                                   const SampleShape& /*out*/) {
  return std::make_unique<DropoutLayer>(def, index, in);
}

absl::StatusOr<std::unique_ptr<Layer>> MakeFlatten(const LayerDef& /*def*/,
                                                   int /*index*/,
                                                   const SampleShape& /*in*/,
                                                   const SampleShape& /*out*/) {
  return std::make_unique<FlattenLayer>();
}

}  // namespace

const LayerKind kReluKind = {
    .name = "ReLU",
    .parse_args = &ParseRelu,
    .output_shape = &SameShape,
    .activation = ActivationRole::kRelu,
    .make = &MakeRelu,
};

const LayerKind kDropoutKind = {
    .name = "Dropout",
    .parse_args = &ParseDropout,
    .write_args = &WriteDropout,
    .output_shape = &DropoutOutput,
    .activation = ActivationRole::kTransparent,
    .make = &MakeDropout,
};

const LayerKind kFlattenKind = {
    .name = "Flatten",
    .parse_args = &ParseFlatten,
    .output_shape = &FlattenOutput,
    .activation = ActivationRole::kTransparent,
    .make = &MakeFlatten,
};

}  // namespace ferry

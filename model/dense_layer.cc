// Linear: y[N, out] = x[N, in] W[out, in]^T + b, exactly the operations (and
// so the bits) of model/mlp.cc.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/layer_families.h"

namespace ferry {
namespace {

class LinearLayer final : public Layer {
 public:
  explicit LinearLayer(const LayerDef& def)
      : in_(static_cast<int>(def.in_features)),
        out_(static_cast<int>(def.out_features)),
        bias_(def.bias) {}

  absl::Status Forward(const LayerContext& ctx, const float* params,
                       float* /*state*/, const float* x, float* y) override {
    RETURN_IF_ERROR(ctx.backend->Gemm(Transpose::kNo, Transpose::kYes,
                                      ctx.batch, out_, in_, 1.0f, x, in_,
                                      params, in_, 0.0f, y, out_));
    if (bias_) {
      RETURN_IF_ERROR(ctx.backend->AddBias(ctx.batch, out_, Bias(params), y));
    }
    return absl::OkStatus();
  }

  absl::Status Backward(const LayerContext& ctx, const float* params,
                        const float* x, const float* /*y*/, const float* dy,
                        float* dx, float* dparams) override {
    // dW[out, in] = dy[N, out]^T x[N, in]; db = column sums of dy.
    RETURN_IF_ERROR(ctx.backend->Gemm(Transpose::kYes, Transpose::kNo, out_,
                                      in_, ctx.batch, 1.0f, dy, out_, x, in_,
                                      0.0f, dparams, in_));
    if (bias_) {
      RETURN_IF_ERROR(
          ctx.backend->BiasGrad(ctx.batch, out_, dy, dparams + Weights()));
    }
    if (dx != nullptr) {
      // dx[N, in] = dy[N, out] W[out, in].
      RETURN_IF_ERROR(ctx.backend->Gemm(Transpose::kNo, Transpose::kNo,
                                        ctx.batch, in_, out_, 1.0f, dy, out_,
                                        params, in_, 0.0f, dx, in_));
    }
    return absl::OkStatus();
  }

 private:
  size_t Weights() const { return static_cast<size_t>(in_) * out_; }
  const float* Bias(const float* params) const { return params + Weights(); }

  int in_;
  int out_;
  bool bias_;
};

absl::Status ParseLinear(LayerArgReader& r, LayerDef& d) {
  ASSIGN_OR_RETURN(d.in_features, r.Int("in_features", true, 0));
  ASSIGN_OR_RETURN(d.out_features, r.Int("out_features", true, 0));
  ASSIGN_OR_RETURN(d.bias, r.Bool("bias", true));
  return absl::OkStatus();
}

void WriteLinear(const LayerDef& d, LayerArgWriter& w) {
  w.Int("in_features", d.in_features);
  w.Int("out_features", d.out_features);
  w.Bool("bias", d.bias);
}

absl::StatusOr<SampleShape> LinearOutput(const LayerDef& d,
                                         const SampleShape& in) {
  if (!IsValidDim(d.in_features) || !IsValidDim(d.out_features)) {
    return absl::InvalidArgumentError(
        "in_features and out_features must be > 0");
  }
  if (in.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "needs a flat [F] input, got ", ShapeString(in), " (add a Flatten)"));
  }
  if (in[0] != d.in_features) {
    return absl::InvalidArgumentError(
        absl::StrCat("in_features is ", d.in_features, " but its input has ",
                     in[0], " features"));
  }
  return SampleShape{d.out_features};
}

// torch's Linear: weight [out, in], bias [out].
std::vector<LayerTensor> LinearParams(const LayerDef& d) {
  std::vector<LayerTensor> tensors = {
      {{"weight", {d.out_features, d.in_features}},
       TensorInit::kFanNormal,
       d.in_features,
       d.out_features}};
  if (d.bias) tensors.push_back({{"bias", {d.out_features}}});
  return tensors;
}

double LinearFlops(const LayerDef& d, const SampleShape& /*out*/) {
  return 2.0 * static_cast<double>(d.in_features * d.out_features);
}

absl::StatusOr<std::unique_ptr<Layer>> MakeLinear(const LayerDef& def,
                                                  int index,
                                                  const SampleShape& in,
                                                  const SampleShape& out) {
  if (in != SampleShape{def.in_features} ||
      out != SampleShape{def.out_features}) {
    return RefuseLayerShapes(def, index, in, out,
                             "[in_features] -> [out_features]");
  }
  return std::make_unique<LinearLayer>(def);
}

}  // namespace

const LayerKind kLinearKind = {
    .name = "Linear",
    .parse_args = &ParseLinear,
    .write_args = &WriteLinear,
    .output_shape = &LinearOutput,
    .params = &LinearParams,
    .forward_flops = &LinearFlops,
    .make = &MakeLinear,
};

}  // namespace ferry

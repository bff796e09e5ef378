// Linear: y[N, out] = x[N, in] W[out, in]^T + b, exactly the operations (and
// so the bits) of model/mlp.cc.
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

}  // namespace

std::unique_ptr<Layer> MakeLinearLayer(const LayerDef& def) {
  return std::make_unique<LinearLayer>(def);
}

}  // namespace ferry

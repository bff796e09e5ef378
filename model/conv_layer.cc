// Conv2d as im2col + GEMM, one sample at a time: per sample,
// cols[C*kh*kw, OH*OW] = im2col(x_n) and y_n[out, OH*OW] = W[out, C*kh*kw]
// cols, which is already NCHW. The backward pass recomputes cols (cheaper in
// memory than keeping them for the whole batch) and accumulates dW over the
// samples with beta = 1; dx goes through W^T dy_n and col2im.
#include "common/status_macros.h"
#include "compute/kernel_math.h"
#include "model/layer_families.h"

namespace ferry {
namespace {

class Conv2dLayer final : public Layer {
 public:
  Conv2dLayer(const LayerDef& def, const SampleShape& in)
      : out_channels_(static_cast<int>(def.out_channels)), bias_(def.bias) {
    g_.channels = static_cast<int>(in[0]);
    g_.height = static_cast<int>(in[1]);
    g_.width = static_cast<int>(in[2]);
    g_.kernel_h = static_cast<int>(def.kernel_size.h);
    g_.kernel_w = static_cast<int>(def.kernel_size.w);
    g_.stride_h = static_cast<int>(def.stride.h);
    g_.stride_w = static_cast<int>(def.stride.w);
    g_.pad_h = static_cast<int>(def.padding.h);
    g_.pad_w = static_cast<int>(def.padding.w);
    rows_ = static_cast<int>(ColRows(g_));
    spatial_ = OutHeight(g_) * OutWidth(g_);
    in_size_ = static_cast<size_t>(g_.channels) * g_.height * g_.width;
    out_size_ = static_cast<size_t>(out_channels_) * spatial_;
  }

  absl::Status Reserve(ComputeBackend* backend, int /*batch*/) override {
    const size_t n = static_cast<size_t>(rows_) * spatial_;
    if (cols_.size() >= n) return absl::OkStatus();
    ASSIGN_OR_RETURN(cols_, backend->Allocate(n));
    ASSIGN_OR_RETURN(dcols_, backend->Allocate(n));
    return absl::OkStatus();
  }

  absl::Status Forward(const LayerContext& ctx, const float* params,
                       float* /*state*/, const float* x, float* y) override {
    ComputeBackend* b = ctx.backend;
    for (int n = 0; n < ctx.batch; ++n) {
      RETURN_IF_ERROR(b->Im2Col(g_, x + n * in_size_, cols_.data()));
      RETURN_IF_ERROR(b->Gemm(Transpose::kNo, Transpose::kNo, out_channels_,
                              spatial_, rows_, 1.0f, params, rows_,
                              cols_.data(), spatial_, 0.0f, y + n * out_size_,
                              spatial_));
    }
    if (bias_) {
      RETURN_IF_ERROR(b->AddChannelBias(ctx.batch, out_channels_, spatial_,
                                        params + Weights(), y));
    }
    return absl::OkStatus();
  }

  absl::Status Backward(const LayerContext& ctx, const float* params,
                        const float* x, const float* /*y*/, const float* dy,
                        float* dx, float* dparams) override {
    ComputeBackend* b = ctx.backend;
    if (bias_) {
      RETURN_IF_ERROR(b->ChannelBiasGrad(ctx.batch, out_channels_, spatial_, dy,
                                         dparams + Weights()));
    }
    if (ctx.batch == 0) return b->Fill(0.0f, Weights(), dparams);
    for (int n = 0; n < ctx.batch; ++n) {
      const float* dy_n = dy + n * out_size_;
      RETURN_IF_ERROR(b->Im2Col(g_, x + n * in_size_, cols_.data()));
      // dW[out, rows] (+)= dy_n[out, spatial] cols[rows, spatial]^T.
      RETURN_IF_ERROR(b->Gemm(Transpose::kNo, Transpose::kYes, out_channels_,
                              rows_, spatial_, 1.0f, dy_n, spatial_,
                              cols_.data(), spatial_, n == 0 ? 0.0f : 1.0f,
                              dparams, rows_));
      if (dx != nullptr) {
        // dcols[rows, spatial] = W[out, rows]^T dy_n[out, spatial].
        RETURN_IF_ERROR(b->Gemm(Transpose::kYes, Transpose::kNo, rows_,
                                spatial_, out_channels_, 1.0f, params, rows_,
                                dy_n, spatial_, 0.0f, dcols_.data(), spatial_));
        RETURN_IF_ERROR(b->Col2Im(g_, dcols_.data(), dx + n * in_size_));
      }
    }
    return absl::OkStatus();
  }

 private:
  size_t Weights() const { return static_cast<size_t>(out_channels_) * rows_; }

  WindowGeometry g_;
  int out_channels_;
  bool bias_;
  int rows_ = 0;     // C * kh * kw
  int spatial_ = 0;  // OH * OW
  size_t in_size_ = 0;
  size_t out_size_ = 0;
  DeviceBuffer cols_;
  DeviceBuffer dcols_;
};

}  // namespace

std::unique_ptr<Layer> MakeConv2dLayer(const LayerDef& def,
                                       const SampleShape& in) {
  return std::make_unique<Conv2dLayer>(def, in);
}

}  // namespace ferry

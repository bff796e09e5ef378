// The CUDA backend's convolution ops (compute/conv_ops.h).
#include "compute/conv_ops.h"

#include <memory>

#include "common/status_macros.h"
#include "compute/cuda/cuda_layer_ops.h"
#include "compute/cuda/layer_kernels.h"
#include "compute/layer_checks.h"

namespace ferry {
namespace {

class CudaConvOps final : public ConvOps {
 public:
  explicit CudaConvOps(CudaStream s) : s_(s) {}

  absl::Status Im2Col(const WindowGeometry& g, int n, const float* x,
                      float* cols) override {
    RETURN_IF_ERROR(ValidateWindow("Im2Col", n, g));
    RETURN_IF_ERROR(s_.Activate());
    return FERRY_CUDA_CHECK(kernels::LaunchIm2Col(g, n, x, cols, s_.stream));
  }
  absl::Status Col2Im(const WindowGeometry& g, int n, const float* cols,
                      float* dx) override {
    RETURN_IF_ERROR(ValidateWindow("Col2Im", n, g));
    RETURN_IF_ERROR(s_.Activate());
    return FERRY_CUDA_CHECK(kernels::LaunchCol2Im(g, n, cols, dx, s_.stream));
  }
  absl::Status SwapLeadingAxes(int d0, int d1, int64_t inner, const float* x,
                               float* y) override {
    RETURN_IF_ERROR(ValidateSwap(d0, d1, inner));
    RETURN_IF_ERROR(s_.Activate());
    return FERRY_CUDA_CHECK(
        kernels::LaunchSwapLeadingAxes(d0, d1, inner, x, y, s_.stream));
  }
  absl::Status AddChannelBias(int n, int channels, int spatial,
                              const float* bias, float* x) override {
    RETURN_IF_ERROR(ValidateChannels("AddChannelBias", n, channels, spatial));
    RETURN_IF_ERROR(s_.Activate());
    return FERRY_CUDA_CHECK(kernels::LaunchAddChannelBias(n, channels, spatial,
                                                          bias, x, s_.stream));
  }
  absl::Status ChannelBiasGrad(int n, int channels, int spatial,
                               const float* dy, float* dbias) override {
    RETURN_IF_ERROR(ValidateChannels("ChannelBiasGrad", n, channels, spatial));
    RETURN_IF_ERROR(s_.Activate());
    return FERRY_CUDA_CHECK(kernels::LaunchChannelBiasGrad(
        n, channels, spatial, dy, dbias, s_.stream));
  }

 private:
  CudaStream s_;
};

}  // namespace

std::unique_ptr<LayerOps> MakeCudaConvOps(CudaStream stream) {
  return std::make_unique<CudaConvOps>(stream);
}

}  // namespace ferry

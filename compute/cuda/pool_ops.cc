// The CUDA backend's pooling ops (compute/pool_ops.h).
#include "compute/pool_ops.h"

#include <memory>

#include "common/status_macros.h"
#include "compute/cuda/cuda_layer_ops.h"
#include "compute/cuda/layer_kernels.h"
#include "compute/layer_checks.h"

namespace ferry {
namespace {

class CudaPoolOps final : public PoolOps {
 public:
  explicit CudaPoolOps(CudaStream s) : s_(s) {}

  absl::Status MaxPoolForward(int n, const WindowGeometry& g, const float* x,
                              float* y) override {
    RETURN_IF_ERROR(ValidateWindow("MaxPoolForward", n, g));
    RETURN_IF_ERROR(s_.Activate());
    return FERRY_CUDA_CHECK(
        kernels::LaunchMaxPoolForward(n, g, x, y, s_.stream));
  }
  absl::Status MaxPoolBackward(int n, const WindowGeometry& g, const float* x,
                               const float* dy, float* dx) override {
    RETURN_IF_ERROR(ValidateWindow("MaxPoolBackward", n, g));
    RETURN_IF_ERROR(s_.Activate());
    return FERRY_CUDA_CHECK(
        kernels::LaunchMaxPoolBackward(n, g, x, dy, dx, s_.stream));
  }
  absl::Status AvgPoolForward(int n, const WindowGeometry& g, const float* x,
                              float* y) override {
    RETURN_IF_ERROR(ValidateWindow("AvgPoolForward", n, g));
    RETURN_IF_ERROR(s_.Activate());
    return FERRY_CUDA_CHECK(
        kernels::LaunchAvgPoolForward(n, g, x, y, s_.stream));
  }
  absl::Status AvgPoolBackward(int n, const WindowGeometry& g, const float* dy,
                               float* dx) override {
    RETURN_IF_ERROR(ValidateWindow("AvgPoolBackward", n, g));
    RETURN_IF_ERROR(s_.Activate());
    return FERRY_CUDA_CHECK(
        kernels::LaunchAvgPoolBackward(n, g, dy, dx, s_.stream));
  }

 private:
  CudaStream s_;
};

}  // namespace

std::unique_ptr<LayerOps> MakeCudaPoolOps(CudaStream stream) {
  return std::make_unique<CudaPoolOps>(stream);
}

}  // namespace ferry

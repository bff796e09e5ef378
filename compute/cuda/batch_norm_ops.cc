// The CUDA backend's BatchNorm ops (compute/batch_norm_ops.h).
#include "compute/batch_norm_ops.h"

#include <memory>

#include "common/status_macros.h"
#include "compute/cuda/cuda_layer_ops.h"
#include "compute/cuda/layer_kernels.h"
#include "compute/layer_checks.h"

namespace ferry {
namespace {

class CudaBatchNormOps final : public BatchNormOps {
 public:
  explicit CudaBatchNormOps(CudaStream s) : s_(s) {}

  absl::Status BatchNormForwardTrain(const BatchNormShape& s, const float* x,
                                     const float* gamma, const float* beta,
                                     float* running_mean, float* running_var,
                                     float* num_batches_tracked,
                                     float* save_mean, float* save_invstd,
                                     float* y) override {
    RETURN_IF_ERROR(ValidateBatchNorm("BatchNormForwardTrain", s, true));
    RETURN_IF_ERROR(s_.Activate());
    return FERRY_CUDA_CHECK(kernels::LaunchBatchNormForwardTrain(
        s, x, gamma, beta, running_mean, running_var, num_batches_tracked,
        save_mean, save_invstd, y, s_.stream));
  }
  absl::Status BatchNormForwardEval(const BatchNormShape& s, const float* x,
                                    const float* gamma, const float* beta,
                                    const float* running_mean,
                                    const float* running_var,
                                    float* y) override {
    RETURN_IF_ERROR(ValidateBatchNorm("BatchNormForwardEval", s, false));
    RETURN_IF_ERROR(s_.Activate());
    return FERRY_CUDA_CHECK(kernels::LaunchBatchNormForwardEval(
        s, x, gamma, beta, running_mean, running_var, y, s_.stream));
  }
  absl::Status BatchNormBackward(const BatchNormShape& s, const float* x,
                                 const float* dy, const float* gamma,
                                 const float* save_mean,
                                 const float* save_invstd, float* dx,
                                 float* dgamma, float* dbeta) override {
    RETURN_IF_ERROR(ValidateBatchNorm("BatchNormBackward", s, true));
    RETURN_IF_ERROR(s_.Activate());
    return FERRY_CUDA_CHECK(kernels::LaunchBatchNormBackward(
        s, x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta, s_.stream));
  }

 private:
  CudaStream s_;
};

}  // namespace

std::unique_ptr<LayerOps> MakeCudaBatchNormOps(CudaStream stream) {
  return std::make_unique<CudaBatchNormOps>(stream);
}

}  // namespace ferry

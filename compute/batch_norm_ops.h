// The BatchNorm family's ops (compute/layer_ops.h) over [n, channels,
// spatial] activations. INVALID_ARGUMENT on negative sizes or eps <= 0.
#ifndef FERRY_COMPUTE_BATCH_NORM_OPS_H_
#define FERRY_COMPUTE_BATCH_NORM_OPS_H_

#include "absl/status/status.h"
#include "compute/kernel_math.h"
#include "compute/layer_ops.h"

namespace ferry {

class BatchNormOps : public LayerOps {
 public:
  static constexpr LayerOpsFamily kFamily{"batch_norm"};

  // Training-mode BatchNorm: per-channel batch mean and biased variance over
  // (n, spatial); y = gamma * xhat + beta; save_mean / save_invstd
  // [channels] keep the statistics for the backward pass; running_mean /
  // running_var are updated with PyTorch's momentum rule and the unbiased
  // variance; *num_batches_tracked += 1 when it is non-null. INVALID_ARGUMENT
  // when n * spatial < 2 (PyTorch refuses a single value per channel).
  virtual absl::Status BatchNormForwardTrain(
      const BatchNormShape& s, const float* x, const float* gamma,
      const float* beta, float* running_mean, float* running_var,
      float* num_batches_tracked, float* save_mean, float* save_invstd,
      float* y) = 0;
  // Eval-mode BatchNorm: normalizes with the running statistics.
  virtual absl::Status BatchNormForwardEval(const BatchNormShape& s,
                                            const float* x, const float* gamma,
                                            const float* beta,
                                            const float* running_mean,
                                            const float* running_var,
                                            float* y) = 0;
  // Backward of BatchNormForwardTrain: dx (may be null: not needed), dgamma
  // and dbeta [channels] (overwritten).
  virtual absl::Status BatchNormBackward(const BatchNormShape& s,
                                         const float* x, const float* dy,
                                         const float* gamma,
                                         const float* save_mean,
                                         const float* save_invstd, float* dx,
                                         float* dgamma, float* dbeta) = 0;
};

}  // namespace ferry

#endif  // FERRY_COMPUTE_BATCH_NORM_OPS_H_

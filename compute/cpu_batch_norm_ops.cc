// The CPU backend's BatchNorm ops (compute/batch_norm_ops.h): per-channel
// loops around kernel_math.h's statistics and normalization functions.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "common/status_macros.h"
#include "compute/batch_norm_ops.h"
#include "compute/cpu_layer_ops.h"
#include "compute/layer_checks.h"

namespace ferry {
namespace {

void BatchNormForwardTrainLoop(const BatchNormShape& s, const float* x,
                               const float* gamma, const float* beta,
                               float* running_mean, float* running_var,
                               float* num_batches_tracked, float* save_mean,
                               float* save_invstd, float* y) {
  const int64_t count = static_cast<int64_t>(s.n) * s.spatial;
  for (int c = 0; c < s.channels; ++c) {
    double sum = 0.0;
    for (int i = 0; i < s.n; ++i) {
      const float* p =
          x + (static_cast<size_t>(i) * s.channels + c) * s.spatial;
      for (int k = 0; k < s.spatial; ++k) sum += p[k];
    }
    const double mean = sum / static_cast<double>(count);
    double sq = 0.0;
    for (int i = 0; i < s.n; ++i) {
      const float* p =
          x + (static_cast<size_t>(i) * s.channels + c) * s.spatial;
      for (int k = 0; k < s.spatial; ++k) {
        const double d = p[k] - mean;
        sq += d * d;
      }
    }
    const double var = sq / static_cast<double>(count);
    const float mean_f = static_cast<float>(mean);
    const float invstd = BatchNormInvStd(var, s.eps);
    save_mean[c] = mean_f;
    save_invstd[c] = invstd;
    BatchNormUpdateRunning(s.momentum, mean, var, count, &running_mean[c],
                           &running_var[c]);
    for (int i = 0; i < s.n; ++i) {
      const size_t base = (static_cast<size_t>(i) * s.channels + c) * s.spatial;
      for (int k = 0; k < s.spatial; ++k) {
        y[base + k] =
            BatchNormApply(x[base + k], mean_f, invstd, gamma[c], beta[c]);
      }
    }
  }
  if (num_batches_tracked != nullptr) *num_batches_tracked += 1.0f;
}

void BatchNormForwardEvalLoop(const BatchNormShape& s, const float* x,
                              const float* gamma, const float* beta,
                              const float* running_mean,
                              const float* running_var, float* y) {
  for (int c = 0; c < s.channels; ++c) {
    const float invstd = BatchNormInvStd(running_var[c], s.eps);
    for (int i = 0; i < s.n; ++i) {
      const size_t base = (static_cast<size_t>(i) * s.channels + c) * s.spatial;
      for (int k = 0; k < s.spatial; ++k) {
        y[base + k] = BatchNormApply(x[base + k], running_mean[c], invstd,
                                     gamma[c], beta[c]);
      }
    }
  }
}

void BatchNormBackwardLoop(const BatchNormShape& s, const float* x,
                           const float* dy, const float* gamma,
                           const float* save_mean, const float* save_invstd,
                           float* dx, float* dgamma, float* dbeta) {
  const int64_t count = static_cast<int64_t>(s.n) * s.spatial;
  for (int c = 0; c < s.channels; ++c) {
    const float mean = save_mean[c];
    const float invstd = save_invstd[c];
    double sum_dy = 0.0;
    double sum_dy_xhat = 0.0;
    for (int i = 0; i < s.n; ++i) {
      const size_t base = (static_cast<size_t>(i) * s.channels + c) * s.spatial;
      for (int k = 0; k < s.spatial; ++k) {
        const float xhat = (x[base + k] - mean) * invstd;
        sum_dy += dy[base + k];
        sum_dy_xhat += static_cast<double>(dy[base + k]) * xhat;
      }
    }
    dgamma[c] = static_cast<float>(sum_dy_xhat);
    dbeta[c] = static_cast<float>(sum_dy);
    if (dx == nullptr) continue;
    for (int i = 0; i < s.n; ++i) {
      const size_t base = (static_cast<size_t>(i) * s.channels + c) * s.spatial;
      for (int k = 0; k < s.spatial; ++k) {
        const float xhat = (x[base + k] - mean) * invstd;
        dx[base + k] = BatchNormInputGrad(dy[base + k], xhat, gamma[c], invstd,
                                          sum_dy, sum_dy_xhat, count);
      }
    }
  }
}

// Validates, then runs the loops above.
class CpuBatchNormOps final : public BatchNormOps {
 public:
  absl::Status BatchNormForwardTrain(const BatchNormShape& s, const float* x,
                                     const float* gamma, const float* beta,
                                     float* running_mean, float* running_var,
                                     float* num_batches_tracked,
                                     float* save_mean, float* save_invstd,
                                     float* y) override {
    RETURN_IF_ERROR(ValidateBatchNorm("BatchNormForwardTrain", s, true));
    BatchNormForwardTrainLoop(s, x, gamma, beta, running_mean, running_var,
                              num_batches_tracked, save_mean, save_invstd, y);
    return absl::OkStatus();
  }
  absl::Status BatchNormForwardEval(const BatchNormShape& s, const float* x,
                                    const float* gamma, const float* beta,
                                    const float* running_mean,
                                    const float* running_var,
                                    float* y) override {
    RETURN_IF_ERROR(ValidateBatchNorm("BatchNormForwardEval", s, false));
    BatchNormForwardEvalLoop(s, x, gamma, beta, running_mean, running_var, y);
    return absl::OkStatus();
  }
  absl::Status BatchNormBackward(const BatchNormShape& s, const float* x,
                                 const float* dy, const float* gamma,
                                 const float* save_mean,
                                 const float* save_invstd, float* dx,
                                 float* dgamma, float* dbeta) override {
    RETURN_IF_ERROR(ValidateBatchNorm("BatchNormBackward", s, true));
    BatchNormBackwardLoop(s, x, dy, gamma, save_mean, save_invstd, dx, dgamma,
                          dbeta);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<LayerOps> MakeCpuBatchNormOps() {
  return std::make_unique<CpuBatchNormOps>();
}

}  // namespace ferry

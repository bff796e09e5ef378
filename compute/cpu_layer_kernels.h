// The CPU backend's layer kernels (see the layer-kernel section of
// compute_backend.h for the contracts), as free functions on host memory.
// Loops are arranged for the cache; the per-element math and window
// arithmetic are kernel_math.h's, the same functions the CUDA kernels call.
//
// The backend validates arguments first (compute/layer_checks.h); these
// kernels assume valid arguments.
//
// Thread safety: pure functions of their arguments.
#ifndef FERRY_COMPUTE_CPU_LAYER_KERNELS_H_
#define FERRY_COMPUTE_CPU_LAYER_KERNELS_H_

#include <cstdint>

#include "compute/compute_backend.h"
#include "compute/kernel_math.h"

namespace ferry {

namespace cpu {

void Im2Col(const WindowGeometry& g, int n, const float* x, float* cols);
void Col2Im(const WindowGeometry& g, int n, const float* cols, float* dx);
void SwapLeadingAxes(int d0, int d1, int64_t inner, const float* x, float* y);
void AddChannelBias(int n, int channels, int spatial, const float* bias,
                    float* x);
void ChannelBiasGrad(int n, int channels, int spatial, const float* dy,
                     float* dbias);
void MaxPoolForward(int n, const WindowGeometry& g, const float* x, float* y);
void MaxPoolBackward(int n, const WindowGeometry& g, const float* x,
                     const float* dy, float* dx);
void AvgPoolForward(int n, const WindowGeometry& g, const float* x, float* y);
void AvgPoolBackward(int n, const WindowGeometry& g, const float* dy,
                     float* dx);
void Dropout(int rows, int64_t row_size, const DropoutKey& key, const float* x,
             float* y);
void BatchNormForwardTrain(const BatchNormShape& s, const float* x,
                           const float* gamma, const float* beta,
                           float* running_mean, float* running_var,
                           float* num_batches_tracked, float* save_mean,
                           float* save_invstd, float* y);
void BatchNormForwardEval(const BatchNormShape& s, const float* x,
                          const float* gamma, const float* beta,
                          const float* running_mean, const float* running_var,
                          float* y);
void BatchNormBackward(const BatchNormShape& s, const float* x, const float* dy,
                       const float* gamma, const float* save_mean,
                       const float* save_invstd, float* dx, float* dgamma,
                       float* dbeta);

}  // namespace cpu
}  // namespace ferry

#endif  // FERRY_COMPUTE_CPU_LAYER_KERNELS_H_

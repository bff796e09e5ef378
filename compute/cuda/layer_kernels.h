// Launch functions for the CUDA backend's layer kernels (convolution helpers,
// pooling, dropout, BatchNorm). Plain C++ for nvcc, like kernels.h, whose
// contract (device pointers, asynchronous on `stream`, launch errors only,
// deterministic reductions without atomics) applies here too.
//
// Every kernel computes each element with the FERRY_HD functions of
// compute/kernel_math.h, the ones the CPU backend calls; the launches only map
// threads to elements. Arguments are validated by the caller
// (compute/layer_checks.h).
#ifndef FERRY_COMPUTE_CUDA_LAYER_KERNELS_H_
#define FERRY_COMPUTE_CUDA_LAYER_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "compute/kernel_math.h"

namespace ferry::kernels {

// One thread per cols element: cols[r, c] = x[Im2ColSource(g, r, c)] or 0,
// for n samples side by side.
cudaError_t LaunchIm2Col(const WindowGeometry& g, int n, const float* x,
                         float* cols, cudaStream_t stream);
// One thread per input element of the n samples: dx = Col2ImGather(...).
cudaError_t LaunchCol2Im(const WindowGeometry& g, int n, const float* cols,
                         float* dx, cudaStream_t stream);
// One thread per element: y[i] = x[SwapLeadingAxesSource(d0, d1, inner, i)].
cudaError_t LaunchSwapLeadingAxes(int d0, int d1, int64_t inner, const float* x,
                                  float* y, cudaStream_t stream);
cudaError_t LaunchAddChannelBias(int n, int channels, int spatial,
                                 const float* bias, float* x,
                                 cudaStream_t stream);
// One block per channel, double accumulation.
cudaError_t LaunchChannelBiasGrad(int n, int channels, int spatial,
                                  const float* dy, float* dbias,
                                  cudaStream_t stream);
cudaError_t LaunchMaxPoolForward(int n, const WindowGeometry& g, const float* x,
                                 float* y, cudaStream_t stream);
cudaError_t LaunchMaxPoolBackward(int n, const WindowGeometry& g,
                                  const float* x, const float* dy, float* dx,
                                  cudaStream_t stream);
cudaError_t LaunchAvgPoolForward(int n, const WindowGeometry& g, const float* x,
                                 float* y, cudaStream_t stream);
cudaError_t LaunchAvgPoolBackward(int n, const WindowGeometry& g,
                                  const float* dy, float* dx,
                                  cudaStream_t stream);
cudaError_t LaunchDropout(int rows, int64_t row_size, const DropoutKey& key,
                          const float* x, float* y, cudaStream_t stream);
// One block per channel for the statistics and the normalization.
cudaError_t LaunchBatchNormForwardTrain(const BatchNormShape& s, const float* x,
                                        const float* gamma, const float* beta,
                                        float* running_mean, float* running_var,
                                        float* num_batches_tracked,
                                        float* save_mean, float* save_invstd,
                                        float* y, cudaStream_t stream);
cudaError_t LaunchBatchNormForwardEval(const BatchNormShape& s, const float* x,
                                       const float* gamma, const float* beta,
                                       const float* running_mean,
                                       const float* running_var, float* y,
                                       cudaStream_t stream);
cudaError_t LaunchBatchNormBackward(const BatchNormShape& s, const float* x,
                                    const float* dy, const float* gamma,
                                    const float* save_mean,
                                    const float* save_invstd, float* dx,
                                    float* dgamma, float* dbeta,
                                    cudaStream_t stream);

}  // namespace ferry::kernels

#endif  // FERRY_COMPUTE_CUDA_LAYER_KERNELS_H_

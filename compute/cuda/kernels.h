// Launch functions for the CUDA backend's own kernels (everything that is not
// a GEMM). Plain C++ on purpose: kernels.cu is compiled by nvcc without any
// absl header, and cuda_backend.cc (g++) turns the returned cudaError_t into
// absl::Status.
//
// Contract shared by every function here:
// - Pointers are device memory of the current device, except where noted.
// - Work is queued on `stream` and runs asynchronously; the return value
//   reports launch errors only (cudaGetLastError() after the launch). Errors
//   raised while a kernel runs surface at the next synchronizing call.
// - Zero-sized work queues nothing (or only a memset of the result) and
//   returns cudaSuccess.
// - Arithmetic mirrors compute/cpu_backend.cc expression by expression; results
//   differ from it only by fused multiply-adds and summation order.
// - Reductions are deterministic: fixed grid sizes, fixed combination order,
//   no floating-point atomics.
#ifndef FERRY_COMPUTE_CUDA_KERNELS_H_
#define FERRY_COMPUTE_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "compute/kernel_math.h"

namespace ferry::kernels {

// Device-side result slot of the reductions below (one per backend).
struct ReductionResult {
  double sum;       // loss sum (softmax cross-entropy) or sum of squares
  long long count;  // correct rows (softmax cross-entropy) or non-finite flag
};

// Number of doubles the `partials` scratch of LaunchSumSquares must hold.
inline constexpr int kMaxReductionBlocks = 1024;

// x[i] = value for i in [0, n).
cudaError_t LaunchFill(size_t n, float value, float* x, cudaStream_t stream);

// c[r * ld + j] = beta == 0 ? 0 : beta * c[r * ld + j] for r < rows, j < cols
// (the k == 0 case of a row-major GEMM; beta == 0 overwrites NaNs as BLAS
// does).
cudaError_t LaunchScaleMatrix(int rows, int cols, int ld, float beta, float* c,
                              cudaStream_t stream);

// x[r, c] += bias[c] for a dense [rows, cols] row-major matrix.
cudaError_t LaunchAddBias(int rows, int cols, const float* bias, float* x,
                          cudaStream_t stream);

// dbias[c] = sum_r dy[r, c] (overwrites; zeros when rows == 0). Accumulates in
// double, so it is at least as accurate as the CPU's float loop.
cudaError_t LaunchBiasGrad(int rows, int cols, const float* dy, float* dbias,
                           cudaStream_t stream);

// y = max(x, 0); y may alias x.
cudaError_t LaunchRelu(size_t n, const float* x, float* y, cudaStream_t stream);

// dx = y > 0 ? dy : 0; dx may alias dy.
cudaError_t LaunchReluBackward(size_t n, const float* y, const float* dy,
                               float* dx, cudaStream_t stream);

// Softmax cross-entropy over [rows, cols] logits, one warp per row.
// REQUIRES: every labels[r] (device memory) is in [0, cols): the caller
// validates on the host. `row_loss` and `row_correct` are scratch of `rows`
// elements each. When `dlogits` is non-null it receives
// grad_scale * (softmax - onehot); it may alias `logits`. On completion
// result->sum is the loss sum and result->count the number of rows whose
// (first) argmax equals the label.
cudaError_t LaunchSoftmaxCrossEntropy(int rows, int cols, const float* logits,
                                      const int32_t* labels, float grad_scale,
                                      float* dlogits, double* row_loss,
                                      int32_t* row_correct,
                                      ReductionResult* result,
                                      cudaStream_t stream);

// y += alpha * x.
cudaError_t LaunchAxpy(size_t n, float alpha, const float* x, float* y,
                       cudaStream_t stream);

// x *= alpha.
cudaError_t LaunchScale(size_t n, float alpha, float* x, cudaStream_t stream);

// result->sum = sum of x[i]^2 in double. `partials` is scratch of
// kMaxReductionBlocks doubles.
cudaError_t LaunchSumSquares(size_t n, const float* x, double* partials,
                             ReductionResult* result, cudaStream_t stream);

// result->count = 1 when some x[i] is NaN or +-Inf, else 0.
cudaError_t LaunchFindNonFinite(size_t n, const float* x,
                                ReductionResult* result, cudaStream_t stream);

}  // namespace ferry::kernels

#endif  // FERRY_COMPUTE_CUDA_KERNELS_H_

// CUDA kernels of the compute backend. See kernels.h for the contracts; the
// arithmetic follows compute/cpu_backend.cc expression by expression.
#include "compute/cuda/kernels.h"

namespace ferry::kernels {
namespace {

constexpr int kThreads = 256;  // threads per block, everywhere
constexpr unsigned kMaxElementwiseBlocks = 8192;  // grid-stride beyond this
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;
constexpr int kRowsPerBlock = kThreads / kWarp;  // softmax: one warp per row
constexpr int kBiasGradRows = 16;                // BiasGrad block is 32 x 16

unsigned ElementwiseBlocks(size_t n) {
  const size_t blocks = (n + kThreads - 1) / kThreads;
  return blocks < kMaxElementwiseBlocks ? static_cast<unsigned>(blocks)
                                        : kMaxElementwiseBlocks;
}

__device__ size_t GlobalIndex() {
  return static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ size_t GridStride() {
  return static_cast<size_t>(gridDim.x) * blockDim.x;
}

// Sum of `v` over a block of kThreads threads, valid in thread 0. The order of
// combination is fixed, so the result is deterministic. Safe to call several
// times in a row from the same kernel.
template <typename T>
__device__ T BlockSum(T v) {
  __shared__ T warp_sums[kThreads / kWarp];
  __syncthreads();  // a previous call may still be reading warp_sums
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    v += __shfl_down_sync(kFullMask, v, offset);
  }
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / kWarp ? warp_sums[lane] : T(0);
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      v += __shfl_down_sync(kFullMask, v, offset);
    }
  }
  return v;
}

__global__ void FillKernel(size_t n, float value, float* x) {
  for (size_t i = GlobalIndex(); i < n; i += GridStride()) x[i] = value;
}

__global__ void ScaleMatrixKernel(int rows, int cols, int ld, float beta,
                                  float* c) {
  const size_t total = static_cast<size_t>(rows) * cols;
  for (size_t i = GlobalIndex(); i < total; i += GridStride()) {
    float& e = c[(i / cols) * ld + i % cols];
    e = beta == 0.0f ? 0.0f : beta * e;
  }
}

__global__ void AddBiasKernel(int rows, int cols, const float* bias, float* x) {
  const size_t total = static_cast<size_t>(rows) * cols;
  for (size_t i = GlobalIndex(); i < total; i += GridStride()) {
    x[i] += bias[i % cols];
  }
}

// Block (32, kBiasGradRows): threadIdx.x picks a column of a 32-column tile
// (coalesced reads along the row), threadIdx.y strides over rows.
__global__ void BiasGradKernel(int rows, int cols, const float* dy,
                               float* dbias) {
  __shared__ double partial[kBiasGradRows][kWarp + 1];
  const int col = blockIdx.x * kWarp + threadIdx.x;
  double sum = 0.0;
  if (col < cols) {
    for (int r = threadIdx.y; r < rows; r += kBiasGradRows) {
      sum += dy[static_cast<size_t>(r) * cols + col];
    }
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    double total = 0.0;
    for (int y = 0; y < kBiasGradRows; ++y) total += partial[y][threadIdx.x];
    dbias[col] = static_cast<float>(total);
  }
}

__global__ void ReluKernel(size_t n, const float* x, float* y) {
  for (size_t i = GlobalIndex(); i < n; i += GridStride()) {
    const float v = x[i];
    y[i] = v > 0.0f ? v : 0.0f;
  }
}

__global__ void ReluBackwardKernel(size_t n, const float* y, const float* dy,
                                   float* dx) {
  for (size_t i = GlobalIndex(); i < n; i += GridStride()) {
    dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
  }
}

// (value, index) of the first maximum; index < 0 means "no element yet".
struct ArgMax {
  float value;
  int index;
};

__device__ ArgMax Better(ArgMax a, ArgMax b) {
  if (a.index < 0) return b;
  if (b.index < 0) return a;
  if (b.value > a.value || (b.value == a.value && b.index < a.index)) return b;
  return a;
}

// One warp per row. Every lane ends a butterfly reduction with the same value,
// so no broadcast is needed.
__global__ void SoftmaxCrossEntropyKernel(
    int rows, int cols, const float* logits, const int32_t* labels,
    float grad_scale, float* dlogits, double* row_loss, int32_t* row_correct) {
  const int lane = threadIdx.x % kWarp;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= rows) return;  // whole warp: no block-level sync below
  const float* z = logits + static_cast<size_t>(row) * cols;

  ArgMax best{0.0f, -1};
  for (int c = lane; c < cols; c += kWarp) {
    if (best.index < 0 || z[c] > best.value) best = ArgMax{z[c], c};
  }
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    ArgMax other;
    other.value = __shfl_xor_sync(kFullMask, best.value, offset);
    other.index = __shfl_xor_sync(kFullMask, best.index, offset);
    best = Better(best, other);
  }
  const float max = best.value;

  double sum = 0.0;
  for (int c = lane; c < cols; c += kWarp) {
    sum += exp(static_cast<double>(z[c] - max));
  }
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    sum += __shfl_xor_sync(kFullMask, sum, offset);
  }
  const double log_sum = log(sum);
  const int label = labels[row];
  const float z_label = z[label];

  if (lane == 0) {
    row_loss[row] = log_sum - (z_label - max);
    row_correct[row] = best.index == label ? 1 : 0;
  }
  if (dlogits != nullptr) {
    __syncwarp();  // every lane has read the row: dlogits may alias logits
    float* d = dlogits + static_cast<size_t>(row) * cols;
    for (int c = lane; c < cols; c += kWarp) {
      const double p = exp(static_cast<double>(z[c] - max) - log_sum);
      d[c] = grad_scale * static_cast<float>(p - (c == label ? 1.0 : 0.0));
    }
  }
}

// Single block: sums the per-row results in a fixed order.
__global__ void ReduceRowsKernel(int rows, const double* row_loss,
                                 const int32_t* row_correct,
                                 ReductionResult* result) {
  double loss = 0.0;
  long long correct = 0;
  for (int r = threadIdx.x; r < rows; r += kThreads) {
    loss += row_loss[r];
    correct += row_correct[r];
  }
  loss = BlockSum(loss);
  correct = BlockSum(correct);
  if (threadIdx.x == 0) {
    result->sum = loss;
    result->count = correct;
  }
}

__global__ void AxpyKernel(size_t n, float alpha, const float* x, float* y) {
  for (size_t i = GlobalIndex(); i < n; i += GridStride()) y[i] += alpha * x[i];
}

__global__ void ScaleKernel(size_t n, float alpha, float* x) {
  for (size_t i = GlobalIndex(); i < n; i += GridStride()) x[i] *= alpha;
}

__global__ void SumSquaresPartialKernel(size_t n, const float* x,
                                        double* partials) {
  double sum = 0.0;
  for (size_t i = GlobalIndex(); i < n; i += GridStride()) {
    const double v = x[i];
    sum += v * v;
  }
  sum = BlockSum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

__global__ void SumPartialsKernel(int count, const double* partials,
                                  ReductionResult* result) {
  double sum = 0.0;
  for (int i = threadIdx.x; i < count; i += kThreads) sum += partials[i];
  sum = BlockSum(sum);
  if (threadIdx.x == 0) result->sum = sum;
}

__global__ void FindNonFiniteKernel(size_t n, const float* x,
                                    ReductionResult* result) {
  for (size_t i = GlobalIndex(); i < n; i += GridStride()) {
    if (!isfinite(x[i])) result->count = 1;  // benign race: same value
  }
}

}  // namespace

cudaError_t LaunchFill(size_t n, float value, float* x, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  FillKernel<<<ElementwiseBlocks(n), kThreads, 0, stream>>>(n, value, x);
  return cudaGetLastError();
}

cudaError_t LaunchScaleMatrix(int rows, int cols, int ld, float beta, float* c,
                              cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  const size_t total = static_cast<size_t>(rows) * cols;
  ScaleMatrixKernel<<<ElementwiseBlocks(total), kThreads, 0, stream>>>(
      rows, cols, ld, beta, c);
  return cudaGetLastError();
}

cudaError_t LaunchAddBias(int rows, int cols, const float* bias, float* x,
                          cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  const size_t total = static_cast<size_t>(rows) * cols;
  AddBiasKernel<<<ElementwiseBlocks(total), kThreads, 0, stream>>>(rows, cols,
                                                                   bias, x);
  return cudaGetLastError();
}

cudaError_t LaunchBiasGrad(int rows, int cols, const float* dy, float* dbias,
                           cudaStream_t stream) {
  if (cols <= 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>((cols + kWarp - 1) / kWarp);
  BiasGradKernel<<<blocks, dim3(kWarp, kBiasGradRows), 0, stream>>>(
      rows < 0 ? 0 : rows, cols, dy, dbias);
  return cudaGetLastError();
}

cudaError_t LaunchRelu(size_t n, const float* x, float* y,
                       cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ReluKernel<<<ElementwiseBlocks(n), kThreads, 0, stream>>>(n, x, y);
  return cudaGetLastError();
}

cudaError_t LaunchReluBackward(size_t n, const float* y, const float* dy,
                               float* dx, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ReluBackwardKernel<<<ElementwiseBlocks(n), kThreads, 0, stream>>>(n, y, dy,
                                                                    dx);
  return cudaGetLastError();
}

cudaError_t LaunchSoftmaxCrossEntropy(int rows, int cols, const float* logits,
                                      const int32_t* labels, float grad_scale,
                                      float* dlogits, double* row_loss,
                                      int32_t* row_correct,
                                      ReductionResult* result,
                                      cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) {
    return cudaMemsetAsync(result, 0, sizeof(ReductionResult), stream);
  }
  const unsigned blocks =
      static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  SoftmaxCrossEntropyKernel<<<blocks, kThreads, 0, stream>>>(
      rows, cols, logits, labels, grad_scale, dlogits, row_loss, row_correct);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  ReduceRowsKernel<<<1, kThreads, 0, stream>>>(rows, row_loss, row_correct,
                                               result);
  return cudaGetLastError();
}

cudaError_t LaunchAxpy(size_t n, float alpha, const float* x, float* y,
                       cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  AxpyKernel<<<ElementwiseBlocks(n), kThreads, 0, stream>>>(n, alpha, x, y);
  return cudaGetLastError();
}

cudaError_t LaunchScale(size_t n, float alpha, float* x, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ScaleKernel<<<ElementwiseBlocks(n), kThreads, 0, stream>>>(n, alpha, x);
  return cudaGetLastError();
}

cudaError_t LaunchSumSquares(size_t n, const float* x, double* partials,
                             ReductionResult* result, cudaStream_t stream) {
  if (n == 0) return cudaMemsetAsync(&result->sum, 0, sizeof(double), stream);
  const size_t wanted = (n + kThreads - 1) / kThreads;
  const int blocks = wanted < static_cast<size_t>(kMaxReductionBlocks)
                         ? static_cast<int>(wanted)
                         : kMaxReductionBlocks;
  SumSquaresPartialKernel<<<blocks, kThreads, 0, stream>>>(n, x, partials);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  SumPartialsKernel<<<1, kThreads, 0, stream>>>(blocks, partials, result);
  return cudaGetLastError();
}

cudaError_t LaunchFindNonFinite(size_t n, const float* x,
                                ReductionResult* result, cudaStream_t stream) {
  cudaError_t err =
      cudaMemsetAsync(&result->count, 0, sizeof(result->count), stream);
  if (err != cudaSuccess || n == 0) return err;
  FindNonFiniteKernel<<<ElementwiseBlocks(n), kThreads, 0, stream>>>(n, x,
                                                                     result);
  return cudaGetLastError();
}

}  // namespace ferry::kernels

// CUDA layer kernels: thread-to-element mapping around the FERRY_HD functions
// of compute/kernel_math.h. See layer_kernels.h for the contracts.
#include "compute/cuda/layer_kernels.h"

namespace ferry::kernels {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 8192;  // grid-stride beyond this
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;

unsigned Blocks(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return blocks < kMaxBlocks ? static_cast<unsigned>(blocks) : kMaxBlocks;
}

__device__ int64_t Index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ int64_t Stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// Sum over a block of kThreads threads, returned to every thread. Fixed
// combination order: deterministic.
__device__ double BlockSumAll(double v) {
  __shared__ double warp_sums[kThreads / kWarp];
  __shared__ double total;
  __syncthreads();
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    v += __shfl_down_sync(kFullMask, v, offset);
  }
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / kWarp ? warp_sums[lane] : 0.0;
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      v += __shfl_down_sync(kFullMask, v, offset);
    }
    if (lane == 0) total = v;
  }
  __syncthreads();
  return total;
}

// Element j of channel c among n * spatial: its index in [n, C, spatial].
__device__ int64_t ChannelElement(const BatchNormShape& s, int c, int64_t j) {
  const int64_t i = j / s.spatial;
  const int64_t k = j % s.spatial;
  return (i * s.channels + c) * s.spatial + k;
}

__global__ void Im2ColKernel(WindowGeometry g, int64_t columns, const float* x,
                             float* cols) {
  const int64_t total = ColRows(g) * columns;
  for (int64_t i = Index(); i < total; i += Stride()) {
    const int64_t src = Im2ColSource(g, i / columns, i % columns);
    cols[i] = src < 0 ? 0.0f : x[src];
  }
}

__global__ void Col2ImKernel(WindowGeometry g, int n, const float* cols,
                             float* dx) {
  const int64_t plane = static_cast<int64_t>(g.height) * g.width;
  const int64_t sample = plane * g.channels;
  const int64_t total = sample * n;
  for (int64_t i = Index(); i < total; i += Stride()) {
    const int s = static_cast<int>(i / sample);
    const int c = static_cast<int>((i % sample) / plane);
    const int ih = static_cast<int>((i % plane) / g.width);
    const int iw = static_cast<int>(i % g.width);
    dx[i] = Col2ImGather(g, cols, n, s, c, ih, iw);
  }
}

__global__ void SwapLeadingAxesKernel(int64_t d0, int64_t d1, int64_t inner,
                                      const float* x, float* y) {
  const int64_t total = d0 * d1 * inner;
  for (int64_t i = Index(); i < total; i += Stride()) {
    y[i] = x[SwapLeadingAxesSource(d0, d1, inner, i)];
  }
}

__global__ void AddChannelBiasKernel(int64_t total, int channels, int spatial,
                                     const float* bias, float* x) {
  for (int64_t i = Index(); i < total; i += Stride()) {
    x[i] += bias[(i / spatial) % channels];
  }
}

// Block c sums channel c.
__global__ void ChannelBiasGradKernel(BatchNormShape s, const float* dy,
                                      float* dbias) {
  const int c = blockIdx.x;
  const int64_t count = static_cast<int64_t>(s.n) * s.spatial;
  double sum = 0.0;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    sum += dy[ChannelElement(s, c, j)];
  }
  sum = BlockSumAll(sum);
  if (threadIdx.x == 0) dbias[c] = static_cast<float>(sum);
}

__global__ void MaxPoolForwardKernel(int64_t total, WindowGeometry g,
                                     const float* x, float* y) {
  const int ow_count = OutWidth(g);
  const int64_t out_plane = static_cast<int64_t>(OutHeight(g)) * ow_count;
  const int64_t in_plane = static_cast<int64_t>(g.height) * g.width;
  for (int64_t i = Index(); i < total; i += Stride()) {
    const float* plane = x + (i / out_plane) * in_plane;
    const int64_t o = i % out_plane;
    const int best = MaxPoolArgmax(g, plane, static_cast<int>(o / ow_count),
                                   static_cast<int>(o % ow_count));
    y[i] = best < 0 ? 0.0f : plane[best];
  }
}

__global__ void MaxPoolBackwardKernel(int64_t total, WindowGeometry g,
                                      const float* x, const float* dy,
                                      float* dx) {
  const int64_t out_plane = static_cast<int64_t>(OutHeight(g)) * OutWidth(g);
  const int64_t in_plane = static_cast<int64_t>(g.height) * g.width;
  for (int64_t i = Index(); i < total; i += Stride()) {
    const int64_t p = i / in_plane;
    const int64_t o = i % in_plane;
    dx[i] = MaxPoolGrad(g, x + p * in_plane, dy + p * out_plane,
                        static_cast<int>(o / g.width),
                        static_cast<int>(o % g.width));
  }
}

__global__ void AvgPoolForwardKernel(int64_t total, WindowGeometry g,
                                     const float* x, float* y) {
  const int ow_count = OutWidth(g);
  const int64_t out_plane = static_cast<int64_t>(OutHeight(g)) * ow_count;
  const int64_t in_plane = static_cast<int64_t>(g.height) * g.width;
  for (int64_t i = Index(); i < total; i += Stride()) {
    const int64_t o = i % out_plane;
    y[i] = AvgPoolValue(g, x + (i / out_plane) * in_plane,
                        static_cast<int>(o / ow_count),
                        static_cast<int>(o % ow_count));
  }
}

__global__ void AvgPoolBackwardKernel(int64_t total, WindowGeometry g,
                                      const float* dy, float* dx) {
  const int64_t out_plane = static_cast<int64_t>(OutHeight(g)) * OutWidth(g);
  const int64_t in_plane = static_cast<int64_t>(g.height) * g.width;
  for (int64_t i = Index(); i < total; i += Stride()) {
    const int64_t o = i % in_plane;
    dx[i] = AvgPoolGrad(g, dy + (i / in_plane) * out_plane,
                        static_cast<int>(o / g.width),
                        static_cast<int>(o % g.width));
  }
}

__global__ void DropoutKernel(int64_t total, int64_t row_size, DropoutKey key,
                              const float* x, float* y) {
  for (int64_t i = Index(); i < total; i += Stride()) {
    y[i] = x[i] * DropoutFactor(key, i / row_size, i % row_size);
  }
}

// Block c: statistics of channel c, running-stat update, normalization.
__global__ void BatchNormForwardTrainKernel(
    BatchNormShape s, const float* x, const float* gamma, const float* beta,
    float* running_mean, float* running_var, float* num_batches_tracked,
    float* save_mean, float* save_invstd, float* y) {
  const int c = blockIdx.x;
  const int64_t count = static_cast<int64_t>(s.n) * s.spatial;
  double sum = 0.0;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    sum += x[ChannelElement(s, c, j)];
  }
  const double mean = BlockSumAll(sum) / static_cast<double>(count);
  double sq = 0.0;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const double d = x[ChannelElement(s, c, j)] - mean;
    sq += d * d;
  }
  const double var = BlockSumAll(sq) / static_cast<double>(count);
  const float mean_f = static_cast<float>(mean);
  const float invstd = BatchNormInvStd(var, s.eps);
  if (threadIdx.x == 0) {
    save_mean[c] = mean_f;
    save_invstd[c] = invstd;
    BatchNormUpdateRunning(s.momentum, mean, var, count, &running_mean[c],
                           &running_var[c]);
    if (c == 0 && num_batches_tracked != nullptr) *num_batches_tracked += 1.0f;
  }
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const int64_t e = ChannelElement(s, c, j);
    y[e] = BatchNormApply(x[e], mean_f, invstd, gamma[c], beta[c]);
  }
}

__global__ void BatchNormForwardEvalKernel(int64_t total, BatchNormShape s,
                                           const float* x, const float* gamma,
                                           const float* beta,
                                           const float* running_mean,
                                           const float* running_var, float* y) {
  for (int64_t i = Index(); i < total; i += Stride()) {
    const int c = static_cast<int>((i / s.spatial) % s.channels);
    y[i] = BatchNormApply(x[i], running_mean[c],
                          BatchNormInvStd(running_var[c], s.eps), gamma[c],
                          beta[c]);
  }
}

__global__ void BatchNormBackwardKernel(BatchNormShape s, const float* x,
                                        const float* dy, const float* gamma,
                                        const float* save_mean,
                                        const float* save_invstd, float* dx,
                                        float* dgamma, float* dbeta) {
  const int c = blockIdx.x;
  const int64_t count = static_cast<int64_t>(s.n) * s.spatial;
  const float mean = save_mean[c];
  const float invstd = save_invstd[c];
  double sum_dy = 0.0;
  double sum_dy_xhat = 0.0;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const int64_t e = ChannelElement(s, c, j);
    const float xhat = (x[e] - mean) * invstd;
    sum_dy += dy[e];
    sum_dy_xhat += static_cast<double>(dy[e]) * xhat;
  }
  sum_dy = BlockSumAll(sum_dy);
  sum_dy_xhat = BlockSumAll(sum_dy_xhat);
  if (threadIdx.x == 0) {
    dgamma[c] = static_cast<float>(sum_dy_xhat);
    dbeta[c] = static_cast<float>(sum_dy);
  }
  if (dx == nullptr) return;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const int64_t e = ChannelElement(s, c, j);
    const float xhat = (x[e] - mean) * invstd;
    dx[e] = BatchNormInputGrad(dy[e], xhat, gamma[c], invstd, sum_dy,
                               sum_dy_xhat, count);
  }
}

cudaError_t Launched() { return cudaGetLastError(); }

}  // namespace

cudaError_t LaunchIm2Col(const WindowGeometry& g, int n, const float* x,
                         float* cols, cudaStream_t stream) {
  const int64_t columns = static_cast<int64_t>(n) * OutHeight(g) *
                          static_cast<int64_t>(OutWidth(g));
  const int64_t total = ColRows(g) * columns;
  if (total == 0) return cudaSuccess;
  Im2ColKernel<<<Blocks(total), kThreads, 0, stream>>>(g, columns, x, cols);
  return Launched();
}

cudaError_t LaunchCol2Im(const WindowGeometry& g, int n, const float* cols,
                         float* dx, cudaStream_t stream) {
  const int64_t total =
      static_cast<int64_t>(n) * g.channels * g.height * g.width;
  if (total == 0) return cudaSuccess;
  Col2ImKernel<<<Blocks(total), kThreads, 0, stream>>>(g, n, cols, dx);
  return Launched();
}

cudaError_t LaunchSwapLeadingAxes(int d0, int d1, int64_t inner, const float* x,
                                  float* y, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(d0) * d1 * inner;
  if (total == 0) return cudaSuccess;
  SwapLeadingAxesKernel<<<Blocks(total), kThreads, 0, stream>>>(d0, d1, inner,
                                                                x, y);
  return Launched();
}

cudaError_t LaunchAddChannelBias(int n, int channels, int spatial,
                                 const float* bias, float* x,
                                 cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(n) * channels * spatial;
  if (total == 0) return cudaSuccess;
  AddChannelBiasKernel<<<Blocks(total), kThreads, 0, stream>>>(
      total, channels, spatial, bias, x);
  return Launched();
}

cudaError_t LaunchChannelBiasGrad(int n, int channels, int spatial,
                                  const float* dy, float* dbias,
                                  cudaStream_t stream) {
  if (channels == 0) return cudaSuccess;
  BatchNormShape s;
  s.n = n;
  s.channels = channels;
  s.spatial = spatial;
  ChannelBiasGradKernel<<<channels, kThreads, 0, stream>>>(s, dy, dbias);
  return Launched();
}

cudaError_t LaunchMaxPoolForward(int n, const WindowGeometry& g, const float* x,
                                 float* y, cudaStream_t stream) {
  const int64_t total =
      static_cast<int64_t>(n) * g.channels * OutHeight(g) * OutWidth(g);
  if (total == 0) return cudaSuccess;
  MaxPoolForwardKernel<<<Blocks(total), kThreads, 0, stream>>>(total, g, x, y);
  return Launched();
}

cudaError_t LaunchMaxPoolBackward(int n, const WindowGeometry& g,
                                  const float* x, const float* dy, float* dx,
                                  cudaStream_t stream) {
  const int64_t total =
      static_cast<int64_t>(n) * g.channels * g.height * g.width;
  if (total == 0) return cudaSuccess;
  MaxPoolBackwardKernel<<<Blocks(total), kThreads, 0, stream>>>(total, g, x, dy,
                                                                dx);
  return Launched();
}

cudaError_t LaunchAvgPoolForward(int n, const WindowGeometry& g, const float* x,
                                 float* y, cudaStream_t stream) {
  const int64_t total =
      static_cast<int64_t>(n) * g.channels * OutHeight(g) * OutWidth(g);
  if (total == 0) return cudaSuccess;
  AvgPoolForwardKernel<<<Blocks(total), kThreads, 0, stream>>>(total, g, x, y);
  return Launched();
}

cudaError_t LaunchAvgPoolBackward(int n, const WindowGeometry& g,
                                  const float* dy, float* dx,
                                  cudaStream_t stream) {
  const int64_t total =
      static_cast<int64_t>(n) * g.channels * g.height * g.width;
  if (total == 0) return cudaSuccess;
  AvgPoolBackwardKernel<<<Blocks(total), kThreads, 0, stream>>>(total, g, dy,
                                                                dx);
  return Launched();
}

cudaError_t LaunchDropout(int rows, int64_t row_size, const DropoutKey& key,
                          const float* x, float* y, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(rows) * row_size;
  if (total == 0) return cudaSuccess;
  DropoutKernel<<<Blocks(total), kThreads, 0, stream>>>(total, row_size, key, x,
                                                        y);
  return Launched();
}

cudaError_t LaunchBatchNormForwardTrain(const BatchNormShape& s, const float* x,
                                        const float* gamma, const float* beta,
                                        float* running_mean, float* running_var,
                                        float* num_batches_tracked,
                                        float* save_mean, float* save_invstd,
                                        float* y, cudaStream_t stream) {
  if (s.channels == 0) return cudaSuccess;
  BatchNormForwardTrainKernel<<<s.channels, kThreads, 0, stream>>>(
      s, x, gamma, beta, running_mean, running_var, num_batches_tracked,
      save_mean, save_invstd, y);
  return Launched();
}

cudaError_t LaunchBatchNormForwardEval(const BatchNormShape& s, const float* x,
                                       const float* gamma, const float* beta,
                                       const float* running_mean,
                                       const float* running_var, float* y,
                                       cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(s.n) * s.channels * s.spatial;
  if (total == 0) return cudaSuccess;
  BatchNormForwardEvalKernel<<<Blocks(total), kThreads, 0, stream>>>(
      total, s, x, gamma, beta, running_mean, running_var, y);
  return Launched();
}

cudaError_t LaunchBatchNormBackward(const BatchNormShape& s, const float* x,
                                    const float* dy, const float* gamma,
                                    const float* save_mean,
                                    const float* save_invstd, float* dx,
                                    float* dgamma, float* dbeta,
                                    cudaStream_t stream) {
  if (s.channels == 0) return cudaSuccess;
  BatchNormBackwardKernel<<<s.channels, kThreads, 0, stream>>>(
      s, x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
  return Launched();
}

}  // namespace ferry::kernels

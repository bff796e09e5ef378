// Per-element math and index arithmetic of the layer kernels, shared by the
// CPU backend (g++) and the CUDA kernels (nvcc). Everything here is an inline
// pure function marked FERRY_HD (__host__ __device__ under nvcc), so the CPU
// tests of these functions prove what the GPU computes too; the .cu files only
// launch threads that call them.
//
// Layouts: activations are NCHW (a [C, H, W] sample after another); a 1-d
// BatchNorm input [N, F] is the NCHW case with H * W = 1.
//
// Thread safety: pure functions, no state.
#ifndef FERRY_COMPUTE_KERNEL_MATH_H_
#define FERRY_COMPUTE_KERNEL_MATH_H_

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define FERRY_HD __host__ __device__
#else
#define FERRY_HD
#endif

namespace ferry {

// One 2-d sliding window (convolution or pooling) over [C, H, W] samples.
struct WindowGeometry {
  int channels = 0;
  int height = 0;
  int width = 0;
  int kernel_h = 1;
  int kernel_w = 1;
  int stride_h = 1;
  int stride_w = 1;
  int pad_h = 0;
  int pad_w = 0;
};

// Output size of a window of `kernel` with `stride` and `pad` on both sides
// over `in` elements (floor mode, as PyTorch); <= 0 when the window does not
// fit.
FERRY_HD inline int WindowOutSize(int in, int kernel, int stride, int pad) {
  const int span = in + 2 * pad - kernel;
  return span < 0 ? 0 : span / stride + 1;
}
FERRY_HD inline int OutHeight(const WindowGeometry& g) {
  return WindowOutSize(g.height, g.kernel_h, g.stride_h, g.pad_h);
}
FERRY_HD inline int OutWidth(const WindowGeometry& g) {
  return WindowOutSize(g.width, g.kernel_w, g.stride_w, g.pad_w);
}
// Rows of the im2col matrix: C * kh * kw.
FERRY_HD inline int64_t ColRows(const WindowGeometry& g) {
  return static_cast<int64_t>(g.channels) * g.kernel_h * g.kernel_w;
}

// Input coordinate that kernel offset `k` of output position `o` reads; may be
// outside [0, in) (padding).
FERRY_HD inline int WindowInputCoord(int o, int k, int stride, int pad) {
  return o * stride - pad + k;
}

// Output positions o whose window covers input coordinate `i`: [*lo, *hi)
// (empty when *lo >= *hi).
FERRY_HD inline void WindowsCovering(int i, int kernel, int stride, int pad,
                                     int out, int* lo, int* hi) {
  // o * stride - pad <= i  and  i < o * stride - pad + kernel.
  const int a = i + pad - kernel + 1;  // o * stride >= a
  int first = a <= 0 ? 0 : (a + stride - 1) / stride;
  int last = (i + pad) / stride + 1;  // o * stride <= i + pad
  if (i + pad < 0) last = 0;
  if (last > out) last = out;
  if (first > last) first = last;
  *lo = first;
  *hi = last;
}

// im2col of n samples: the matrix cols[C * kh * kw, n * OH * OW], whose
// column i * OH * OW + s is output position s of sample i. Element (row, col)
// reads the input at the returned index into x [n, C, H, W], or -1 for a
// padding position (value 0).
FERRY_HD inline int64_t Im2ColSource(const WindowGeometry& g, int64_t row,
                                     int64_t col) {
  const int ow_count = OutWidth(g);
  const int64_t ohw = static_cast<int64_t>(OutHeight(g)) * ow_count;
  const int64_t sample = col / ohw;
  const int64_t s = col % ohw;
  const int kj = static_cast<int>(row % g.kernel_w);
  const int ki = static_cast<int>((row / g.kernel_w) % g.kernel_h);
  const int c =
      static_cast<int>(row / (static_cast<int64_t>(g.kernel_w) * g.kernel_h));
  const int oh = static_cast<int>(s / ow_count);
  const int ow = static_cast<int>(s % ow_count);
  const int ih = WindowInputCoord(oh, ki, g.stride_h, g.pad_h);
  const int iw = WindowInputCoord(ow, kj, g.stride_w, g.pad_w);
  if (ih < 0 || ih >= g.height || iw < 0 || iw >= g.width) return -1;
  return ((sample * g.channels + c) * g.height + ih) * g.width + iw;
}

// col2im as a gather (deterministic, no atomics): the gradient of input
// element (c, ih, iw) of sample `sample` is the sum of every cols[row, col]
// that im2col read from it. `cols` is [C * kh * kw, n * OH * OW] (the layout
// of Im2ColSource).
FERRY_HD inline float Col2ImGather(const WindowGeometry& g, const float* cols,
                                   int n, int sample, int c, int ih, int iw) {
  const int oh_count = OutHeight(g);
  const int ow_count = OutWidth(g);
  const int64_t ohw = static_cast<int64_t>(oh_count) * ow_count;
  const float* block = cols + static_cast<int64_t>(sample) * ohw;
  int oh_lo, oh_hi, ow_lo, ow_hi;
  WindowsCovering(ih, g.kernel_h, g.stride_h, g.pad_h, oh_count, &oh_lo,
                  &oh_hi);
  WindowsCovering(iw, g.kernel_w, g.stride_w, g.pad_w, ow_count, &ow_lo,
                  &ow_hi);
  float sum = 0.0f;
  for (int oh = oh_lo; oh < oh_hi; ++oh) {
    const int ki = ih + g.pad_h - oh * g.stride_h;
    for (int ow = ow_lo; ow < ow_hi; ++ow) {
      const int kj = iw + g.pad_w - ow * g.stride_w;
      const int64_t row =
          (static_cast<int64_t>(c) * g.kernel_h + ki) * g.kernel_w + kj;
      sum += block[row * n * ohw + static_cast<int64_t>(oh) * ow_count + ow];
    }
  }
  return sum;
}

// Swapping the two leading axes, y[b, a, s] = x[a, b, s] for x [d0, d1,
// inner] and y [d1, d0, inner]: the index into x of y's element i.
FERRY_HD inline int64_t SwapLeadingAxesSource(int64_t d0, int64_t d1,
                                              int64_t inner, int64_t i) {
  const int64_t b = i / (d0 * inner);
  const int64_t rest = i % (d0 * inner);
  const int64_t a = rest / inner;
  return (a * d1 + b) * inner + rest % inner;
}

// Max pooling: the index into the [H, W] plane `x` of the first maximum of
// output (oh, ow)'s window (padding never wins: PyTorch pads with -inf), or
// -1 when the window holds no input element.
FERRY_HD inline int MaxPoolArgmax(const WindowGeometry& g, const float* plane,
                                  int oh, int ow) {
  int best = -1;
  float best_value = 0.0f;
  for (int ki = 0; ki < g.kernel_h; ++ki) {
    const int ih = WindowInputCoord(oh, ki, g.stride_h, g.pad_h);
    if (ih < 0 || ih >= g.height) continue;
    for (int kj = 0; kj < g.kernel_w; ++kj) {
      const int iw = WindowInputCoord(ow, kj, g.stride_w, g.pad_w);
      if (iw < 0 || iw >= g.width) continue;
      const int index = ih * g.width + iw;
      const float v = plane[index];
      // NaN propagates like PyTorch: a NaN is taken and kept.
      if (best < 0 || v > best_value || (v != v && best_value == best_value)) {
        best = index;
        best_value = v;
      }
    }
  }
  return best;
}

// Whether max pooling's scan replaces the best value so far by `v`: a larger
// value, or the first NaN (MaxPoolArgmax's rule).
FERRY_HD inline bool MaxPoolTakes(float v, float best) {
  return v > best || (v != v && best == best);
}

// MaxPoolArgmax for a 2x2 window of stride 2 without padding, output
// (oh, ow) of a plane `width` wide: the same element (first maximum, first
// NaN) picked as a pairwise tree, (top-left, top-right) and (bottom-left,
// bottom-right), then the two winners with the top one first. Its short,
// branch-free dependency chain is what lets the CPU loop vectorize.
// Writes the maximum to *value and returns its index in the plane.
FERRY_HD inline int MaxPool2x2(const float* plane, int width, int oh, int ow,
                               float* value) {
  const int top = 2 * oh * width + 2 * ow;
  const int bottom = top + width;
  float a = plane[top];
  int ia = top;
  bool take = MaxPoolTakes(plane[top + 1], a);
  a = take ? plane[top + 1] : a;
  ia = take ? top + 1 : ia;
  float c = plane[bottom];
  int ic = bottom;
  take = MaxPoolTakes(plane[bottom + 1], c);
  c = take ? plane[bottom + 1] : c;
  ic = take ? bottom + 1 : ic;
  take = MaxPoolTakes(c, a);
  *value = take ? c : a;
  return take ? ic : ia;
}

// Whether a max pooling is the 2x2, stride-2, unpadded kind of MaxPool2x2.
FERRY_HD inline bool IsMaxPool2x2(const WindowGeometry& g) {
  return g.kernel_h == 2 && g.kernel_w == 2 && g.stride_h == 2 &&
         g.stride_w == 2 && g.pad_h == 0 && g.pad_w == 0;
}

// Average pooling (count_include_pad=True): the window sum over real input
// elements divided by kh * kw.
FERRY_HD inline float AvgPoolValue(const WindowGeometry& g, const float* plane,
                                   int oh, int ow) {
  float sum = 0.0f;
  for (int ki = 0; ki < g.kernel_h; ++ki) {
    const int ih = WindowInputCoord(oh, ki, g.stride_h, g.pad_h);
    if (ih < 0 || ih >= g.height) continue;
    for (int kj = 0; kj < g.kernel_w; ++kj) {
      const int iw = WindowInputCoord(ow, kj, g.stride_w, g.pad_w);
      if (iw < 0 || iw >= g.width) continue;
      sum += plane[ih * g.width + iw];
    }
  }
  return sum / static_cast<float>(g.kernel_h * g.kernel_w);
}

// Average pooling backward as a gather: d input (ih, iw) = sum of dy over the
// windows covering it, / (kh * kw). `dy_plane` is [OH, OW].
FERRY_HD inline float AvgPoolGrad(const WindowGeometry& g,
                                  const float* dy_plane, int ih, int iw) {
  const int oh_count = OutHeight(g);
  const int ow_count = OutWidth(g);
  int oh_lo, oh_hi, ow_lo, ow_hi;
  WindowsCovering(ih, g.kernel_h, g.stride_h, g.pad_h, oh_count, &oh_lo,
                  &oh_hi);
  WindowsCovering(iw, g.kernel_w, g.stride_w, g.pad_w, ow_count, &ow_lo,
                  &ow_hi);
  float sum = 0.0f;
  for (int oh = oh_lo; oh < oh_hi; ++oh) {
    for (int ow = ow_lo; ow < ow_hi; ++ow) sum += dy_plane[oh * ow_count + ow];
  }
  return sum / static_cast<float>(g.kernel_h * g.kernel_w);
}

// Max pooling backward as a gather: d input (ih, iw) = sum of dy over the
// windows covering it whose argmax is this element.
FERRY_HD inline float MaxPoolGrad(const WindowGeometry& g, const float* plane,
                                  const float* dy_plane, int ih, int iw) {
  const int oh_count = OutHeight(g);
  const int ow_count = OutWidth(g);
  int oh_lo, oh_hi, ow_lo, ow_hi;
  WindowsCovering(ih, g.kernel_h, g.stride_h, g.pad_h, oh_count, &oh_lo,
                  &oh_hi);
  WindowsCovering(iw, g.kernel_w, g.stride_w, g.pad_w, ow_count, &ow_lo,
                  &ow_hi);
  const int self = ih * g.width + iw;
  float sum = 0.0f;
  for (int oh = oh_lo; oh < oh_hi; ++oh) {
    for (int ow = ow_lo; ow < ow_hi; ++ow) {
      if (MaxPoolArgmax(g, plane, oh, ow) == self) {
        sum += dy_plane[oh * ow_count + ow];
      }
    }
  }
  return sum;
}

// ---- Dropout ---------------------------------------------------------------

// Which dropout mask one call draws: a pure function of these and the element,
// so any split of a global batch into per-worker pieces draws the same masks.
struct DropoutKey {
  uint64_t seed = 0;         // job seed
  int64_t step = 0;          // global training step
  int64_t first_sample = 0;  // position of row 0 in the global batch
  uint32_t layer = 0;        // layer index in the model
  float p = 0.5f;            // drop probability, in [0, 1)
};

// splitmix64's finalizer: a bijective 64-bit mixer.
FERRY_HD inline uint64_t Mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) with 24 bits, from (key, sample position, element index
// within the sample).
FERRY_HD inline float DropoutUniform(const DropoutKey& key, int64_t sample,
                                     int64_t element) {
  uint64_t h = Mix64(key.seed ^ 0x6a09e667f3bcc909ull);
  h = Mix64(h ^ static_cast<uint64_t>(key.step));
  h = Mix64(h ^ (static_cast<uint64_t>(key.layer) << 32));
  h = Mix64(h ^ static_cast<uint64_t>(sample));
  h = Mix64(h ^ static_cast<uint64_t>(element));
  return static_cast<float>(h >> 40) * 0x1.0p-24f;
}

// The factor element `element` of row `row` is multiplied by in training:
// 0 (dropped) or 1 / (1 - p) (kept).
FERRY_HD inline float DropoutFactor(const DropoutKey& key, int64_t row,
                                    int64_t element) {
  const bool keep =
      DropoutUniform(key, key.first_sample + row, element) >= key.p;
  return keep ? 1.0f / (1.0f - key.p) : 0.0f;
}

// ---- BatchNorm -------------------------------------------------------------

// Shape and hyper-parameters of one BatchNorm call over x [n, channels,
// spatial] (NCHW with spatial = H * W; BatchNorm1d over [n, F] has spatial 1).
struct BatchNormShape {
  int n = 0;
  int channels = 0;
  int spatial = 1;
  float eps = 1e-5f;
  float momentum = 0.1f;
};

// 1 / sqrt(biased variance + eps).
FERRY_HD inline float BatchNormInvStd(double var, float eps) {
  return static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)));
}

// y = gamma * (x - mean) * invstd + beta.
FERRY_HD inline float BatchNormApply(float x, float mean, float invstd,
                                     float gamma, float beta) {
  return gamma * ((x - mean) * invstd) + beta;
}

// PyTorch's running-statistics update: running = (1 - m) running + m batch,
// with the unbiased variance var * n / (n - 1) (n = elements per channel).
FERRY_HD inline void BatchNormUpdateRunning(float momentum, double mean,
                                            double biased_var, int64_t n,
                                            float* running_mean,
                                            float* running_var) {
  const double unbiased =
      n > 1 ? biased_var * static_cast<double>(n) / static_cast<double>(n - 1)
            : biased_var;
  *running_mean =
      static_cast<float>((1.0 - momentum) * *running_mean + momentum * mean);
  *running_var =
      static_cast<float>((1.0 - momentum) * *running_var + momentum * unbiased);
}

// Training-mode input gradient of one element, from the per-channel sums
// sum_dy = sum(dy) and sum_dy_xhat = sum(dy * xhat) over n elements:
// dx = gamma * invstd / n * (n * dy - sum_dy - xhat * sum_dy_xhat).
FERRY_HD inline float BatchNormInputGrad(float dy, float xhat, float gamma,
                                         float invstd, double sum_dy,
                                         double sum_dy_xhat, int64_t n) {
  const double inv_n = 1.0 / static_cast<double>(n);
  return static_cast<float>(static_cast<double>(gamma) * invstd *
                            (dy - sum_dy * inv_n - xhat * sum_dy_xhat * inv_n));
}

}  // namespace ferry

#endif  // FERRY_COMPUTE_KERNEL_MATH_H_

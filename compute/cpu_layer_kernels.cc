#include "compute/cpu_layer_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ferry {

namespace cpu {

void Im2Col(const WindowGeometry& g, int n, const float* x, float* cols) {
  const int oh_count = OutHeight(g);
  const int ow_count = OutWidth(g);
  const int64_t ohw = static_cast<int64_t>(oh_count) * ow_count;
  const int64_t ld = ohw * n;  // cols row stride
  const size_t in_size = static_cast<size_t>(g.channels) * g.height * g.width;
  for (int i = 0; i < n; ++i) {
    const float* sample = x + i * in_size;
    int64_t r = 0;
    for (int c = 0; c < g.channels; ++c) {
      const float* plane = sample + static_cast<size_t>(c) * g.height * g.width;
      for (int ki = 0; ki < g.kernel_h; ++ki) {
        for (int kj = 0; kj < g.kernel_w; ++kj, ++r) {
          float* out = cols + r * ld + i * ohw;
          for (int oh = 0; oh < oh_count; ++oh, out += ow_count) {
            const int ih = WindowInputCoord(oh, ki, g.stride_h, g.pad_h);
            if (ih < 0 || ih >= g.height) {
              std::fill(out, out + ow_count, 0.0f);
              continue;
            }
            const float* row = plane + static_cast<size_t>(ih) * g.width;
            for (int ow = 0; ow < ow_count; ++ow) {
              const int iw = WindowInputCoord(ow, kj, g.stride_w, g.pad_w);
              out[ow] = (iw >= 0 && iw < g.width) ? row[iw] : 0.0f;
            }
          }
        }
      }
    }
  }
}

void Col2Im(const WindowGeometry& g, int n, const float* cols, float* dx) {
  const int oh_count = OutHeight(g);
  const int ow_count = OutWidth(g);
  const int64_t ohw = static_cast<int64_t>(oh_count) * ow_count;
  const int64_t ld = ohw * n;
  const size_t in_size = static_cast<size_t>(g.channels) * g.height * g.width;
  std::fill(dx, dx + in_size * n, 0.0f);
  for (int i = 0; i < n; ++i) {
    float* sample = dx + i * in_size;
    int64_t r = 0;
    for (int c = 0; c < g.channels; ++c) {
      float* plane = sample + static_cast<size_t>(c) * g.height * g.width;
      for (int ki = 0; ki < g.kernel_h; ++ki) {
        for (int kj = 0; kj < g.kernel_w; ++kj, ++r) {
          const float* in = cols + r * ld + i * ohw;
          for (int oh = 0; oh < oh_count; ++oh, in += ow_count) {
            const int ih = WindowInputCoord(oh, ki, g.stride_h, g.pad_h);
            if (ih < 0 || ih >= g.height) continue;
            float* row = plane + static_cast<size_t>(ih) * g.width;
            for (int ow = 0; ow < ow_count; ++ow) {
              const int iw = WindowInputCoord(ow, kj, g.stride_w, g.pad_w);
              if (iw >= 0 && iw < g.width) row[iw] += in[ow];
            }
          }
        }
      }
    }
  }
}

void SwapLeadingAxes(int d0, int d1, int64_t inner, const float* x, float* y) {
  for (int a = 0; a < d0; ++a) {
    for (int b = 0; b < d1; ++b) {
      std::memcpy(y + (static_cast<int64_t>(b) * d0 + a) * inner,
                  x + (static_cast<int64_t>(a) * d1 + b) * inner,
                  sizeof(float) * inner);
    }
  }
}

void AddChannelBias(int n, int channels, int spatial, const float* bias,
                    float* x) {
  for (int i = 0; i < n; ++i) {
    for (int c = 0; c < channels; ++c) {
      float* p = x + (static_cast<size_t>(i) * channels + c) * spatial;
      const float b = bias[c];
      for (int s = 0; s < spatial; ++s) p[s] += b;
    }
  }
}

void ChannelBiasGrad(int n, int channels, int spatial, const float* dy,
                     float* dbias) {
  for (int c = 0; c < channels; ++c) {
    double sum = 0.0;
    for (int i = 0; i < n; ++i) {
      const float* p = dy + (static_cast<size_t>(i) * channels + c) * spatial;
      float partial = 0.0f;
      for (int s = 0; s < spatial; ++s) partial += p[s];
      sum += partial;
    }
    dbias[c] = static_cast<float>(sum);
  }
}

void MaxPoolForward(int n, const WindowGeometry& g, const float* x, float* y) {
  const int oh_count = OutHeight(g);
  const int ow_count = OutWidth(g);
  const size_t in_plane = static_cast<size_t>(g.height) * g.width;
  const size_t planes = static_cast<size_t>(n) * g.channels;
  const bool two_by_two = IsMaxPool2x2(g);
  for (size_t p = 0; p < planes; ++p) {
    const float* plane = x + p * in_plane;
    float* out = y + p * oh_count * ow_count;
    for (int oh = 0; oh < oh_count; ++oh) {
      if (two_by_two) {  // the common case, vectorized (kernel_math.h)
        for (int ow = 0; ow < ow_count; ++ow) {
          MaxPool2x2(plane, g.width, oh, ow, &out[oh * ow_count + ow]);
        }
        continue;
      }
      for (int ow = 0; ow < ow_count; ++ow) {
        const int best = MaxPoolArgmax(g, plane, oh, ow);
        out[oh * ow_count + ow] = best < 0 ? 0.0f : plane[best];
      }
    }
  }
}

void MaxPoolBackward(int n, const WindowGeometry& g, const float* x,
                     const float* dy, float* dx) {
  const int oh_count = OutHeight(g);
  const int ow_count = OutWidth(g);
  const size_t in_plane = static_cast<size_t>(g.height) * g.width;
  const size_t planes = static_cast<size_t>(n) * g.channels;
  std::fill(dx, dx + planes * in_plane, 0.0f);
  const bool two_by_two = IsMaxPool2x2(g);
  for (size_t p = 0; p < planes; ++p) {
    const float* plane = x + p * in_plane;
    const float* grad = dy + p * oh_count * ow_count;
    float* out = dx + p * in_plane;
    for (int oh = 0; oh < oh_count; ++oh) {
      if (two_by_two) {  // disjoint windows: every element written once
        for (int ow = 0; ow < ow_count; ++ow) {
          float unused;
          const int best = MaxPool2x2(plane, g.width, oh, ow, &unused);
          const float d = grad[oh * ow_count + ow];
          const int top = 2 * oh * g.width + 2 * ow;
          const int bottom = top + g.width;
          out[top] = best == top ? d : 0.0f;
          out[top + 1] = best == top + 1 ? d : 0.0f;
          out[bottom] = best == bottom ? d : 0.0f;
          out[bottom + 1] = best == bottom + 1 ? d : 0.0f;
        }
        continue;
      }
      for (int ow = 0; ow < ow_count; ++ow) {
        const int best = MaxPoolArgmax(g, plane, oh, ow);
        if (best >= 0) out[best] += grad[oh * ow_count + ow];
      }
    }
  }
}

void AvgPoolForward(int n, const WindowGeometry& g, const float* x, float* y) {
  const int oh_count = OutHeight(g);
  const int ow_count = OutWidth(g);
  const size_t in_plane = static_cast<size_t>(g.height) * g.width;
  const size_t planes = static_cast<size_t>(n) * g.channels;
  for (size_t p = 0; p < planes; ++p) {
    const float* plane = x + p * in_plane;
    float* out = y + p * oh_count * ow_count;
    for (int oh = 0; oh < oh_count; ++oh) {
      for (int ow = 0; ow < ow_count; ++ow) {
        out[oh * ow_count + ow] = AvgPoolValue(g, plane, oh, ow);
      }
    }
  }
}

void AvgPoolBackward(int n, const WindowGeometry& g, const float* dy,
                     float* dx) {
  const size_t out_plane = static_cast<size_t>(OutHeight(g)) * OutWidth(g);
  const size_t in_plane = static_cast<size_t>(g.height) * g.width;
  const size_t planes = static_cast<size_t>(n) * g.channels;
  for (size_t p = 0; p < planes; ++p) {
    const float* grad = dy + p * out_plane;
    float* out = dx + p * in_plane;
    for (int ih = 0; ih < g.height; ++ih) {
      for (int iw = 0; iw < g.width; ++iw) {
        out[ih * g.width + iw] = AvgPoolGrad(g, grad, ih, iw);
      }
    }
  }
}

void Dropout(int rows, int64_t row_size, const DropoutKey& key, const float* x,
             float* y) {
  for (int r = 0; r < rows; ++r) {
    const size_t base = static_cast<size_t>(r) * row_size;
    for (int64_t e = 0; e < row_size; ++e) {
      y[base + e] = x[base + e] * DropoutFactor(key, r, e);
    }
  }
}

void BatchNormForwardTrain(const BatchNormShape& s, const float* x,
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

void BatchNormForwardEval(const BatchNormShape& s, const float* x,
                          const float* gamma, const float* beta,
                          const float* running_mean, const float* running_var,
                          float* y) {
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

void BatchNormBackward(const BatchNormShape& s, const float* x, const float* dy,
                       const float* gamma, const float* save_mean,
                       const float* save_invstd, float* dx, float* dgamma,
                       float* dbeta) {
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

}  // namespace cpu
}  // namespace ferry

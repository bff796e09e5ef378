// The CPU backend's convolution ops (compute/conv_ops.h): loops arranged for
// the cache around the index arithmetic of kernel_math.h.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "common/status_macros.h"
#include "compute/conv_ops.h"
#include "compute/cpu_layer_ops.h"
#include "compute/layer_checks.h"

namespace ferry {
namespace {

void Im2ColLoop(const WindowGeometry& g, int n, const float* x, float* cols) {
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

void Col2ImLoop(const WindowGeometry& g, int n, const float* cols, float* dx) {
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

void SwapLeadingAxesLoop(int d0, int d1, int64_t inner, const float* x,
                         float* y) {
  for (int a = 0; a < d0; ++a) {
    for (int b = 0; b < d1; ++b) {
      std::memcpy(y + (static_cast<int64_t>(b) * d0 + a) * inner,
                  x + (static_cast<int64_t>(a) * d1 + b) * inner,
                  sizeof(float) * inner);
    }
  }
}

void AddChannelBiasLoop(int n, int channels, int spatial, const float* bias,
                        float* x) {
  for (int i = 0; i < n; ++i) {
    for (int c = 0; c < channels; ++c) {
      float* p = x + (static_cast<size_t>(i) * channels + c) * spatial;
      const float b = bias[c];
      for (int s = 0; s < spatial; ++s) p[s] += b;
    }
  }
}

void ChannelBiasGradLoop(int n, int channels, int spatial, const float* dy,
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

// Validates, then runs the loops above.
class CpuConvOps final : public ConvOps {
 public:
  absl::Status Im2Col(const WindowGeometry& g, int n, const float* x,
                      float* cols) override {
    RETURN_IF_ERROR(ValidateWindow("Im2Col", n, g));
    Im2ColLoop(g, n, x, cols);
    return absl::OkStatus();
  }
  absl::Status Col2Im(const WindowGeometry& g, int n, const float* cols,
                      float* dx) override {
    RETURN_IF_ERROR(ValidateWindow("Col2Im", n, g));
    Col2ImLoop(g, n, cols, dx);
    return absl::OkStatus();
  }
  absl::Status SwapLeadingAxes(int d0, int d1, int64_t inner, const float* x,
                               float* y) override {
    RETURN_IF_ERROR(ValidateSwap(d0, d1, inner));
    SwapLeadingAxesLoop(d0, d1, inner, x, y);
    return absl::OkStatus();
  }
  absl::Status AddChannelBias(int n, int channels, int spatial,
                              const float* bias, float* x) override {
    RETURN_IF_ERROR(ValidateChannels("AddChannelBias", n, channels, spatial));
    AddChannelBiasLoop(n, channels, spatial, bias, x);
    return absl::OkStatus();
  }
  absl::Status ChannelBiasGrad(int n, int channels, int spatial,
                               const float* dy, float* dbias) override {
    RETURN_IF_ERROR(ValidateChannels("ChannelBiasGrad", n, channels, spatial));
    ChannelBiasGradLoop(n, channels, spatial, dy, dbias);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<LayerOps> MakeCpuConvOps() {
  return std::make_unique<CpuConvOps>();
}

}  // namespace ferry

// The CPU backend's pooling ops (compute/pool_ops.h) on kernel_math.h's
// window functions.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "common/status_macros.h"
#include "compute/cpu_layer_ops.h"
#include "compute/layer_checks.h"
#include "compute/pool_ops.h"

namespace ferry {
namespace {

void MaxPoolForwardLoop(int n, const WindowGeometry& g, const float* x,
                        float* y) {
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

void MaxPoolBackwardLoop(int n, const WindowGeometry& g, const float* x,
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

void AvgPoolForwardLoop(int n, const WindowGeometry& g, const float* x,
                        float* y) {
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

void AvgPoolBackwardLoop(int n, const WindowGeometry& g, const float* dy,
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

// Validates, then runs the loops above.
class CpuPoolOps final : public PoolOps {
 public:
  absl::Status MaxPoolForward(int n, const WindowGeometry& g, const float* x,
                              float* y) override {
    RETURN_IF_ERROR(ValidateWindow("MaxPoolForward", n, g));
    MaxPoolForwardLoop(n, g, x, y);
    return absl::OkStatus();
  }
  absl::Status MaxPoolBackward(int n, const WindowGeometry& g, const float* x,
                               const float* dy, float* dx) override {
    RETURN_IF_ERROR(ValidateWindow("MaxPoolBackward", n, g));
    MaxPoolBackwardLoop(n, g, x, dy, dx);
    return absl::OkStatus();
  }
  absl::Status AvgPoolForward(int n, const WindowGeometry& g, const float* x,
                              float* y) override {
    RETURN_IF_ERROR(ValidateWindow("AvgPoolForward", n, g));
    AvgPoolForwardLoop(n, g, x, y);
    return absl::OkStatus();
  }
  absl::Status AvgPoolBackward(int n, const WindowGeometry& g, const float* dy,
                               float* dx) override {
    RETURN_IF_ERROR(ValidateWindow("AvgPoolBackward", n, g));
    AvgPoolBackwardLoop(n, g, dy, dx);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<LayerOps> MakeCpuPoolOps() {
  return std::make_unique<CpuPoolOps>();
}

}  // namespace ferry

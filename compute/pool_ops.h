// The pooling family's ops (compute/layer_ops.h) over NCHW activations.
// INVALID_ARGUMENT on negative sizes or a window geometry with no output.
#ifndef FERRY_COMPUTE_POOL_OPS_H_
#define FERRY_COMPUTE_POOL_OPS_H_

#include "absl/status/status.h"
#include "compute/kernel_math.h"
#include "compute/layer_ops.h"

namespace ferry {

class PoolOps : public LayerOps {
 public:
  static constexpr LayerOpsFamily kFamily{"pool"};

  // Max pooling of x [n, C, H, W] into y [n, C, OH, OW] (padding never
  // wins). The backward pass recomputes each window's first argmax from x and
  // routes dy there: dx [n, C, H, W] (overwritten).
  virtual absl::Status MaxPoolForward(int n, const WindowGeometry& g,
                                      const float* x, float* y) = 0;
  virtual absl::Status MaxPoolBackward(int n, const WindowGeometry& g,
                                       const float* x, const float* dy,
                                       float* dx) = 0;
  // Average pooling, count_include_pad=True (divisor kh * kw).
  virtual absl::Status AvgPoolForward(int n, const WindowGeometry& g,
                                      const float* x, float* y) = 0;
  virtual absl::Status AvgPoolBackward(int n, const WindowGeometry& g,
                                       const float* dy, float* dx) = 0;
};

}  // namespace ferry

#endif  // FERRY_COMPUTE_POOL_OPS_H_

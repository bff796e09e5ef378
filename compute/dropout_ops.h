// The dropout family's ops (compute/layer_ops.h).
#ifndef FERRY_COMPUTE_DROPOUT_OPS_H_
#define FERRY_COMPUTE_DROPOUT_OPS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "compute/kernel_math.h"
#include "compute/layer_ops.h"

namespace ferry {

class DropoutOps : public LayerOps {
 public:
  static constexpr LayerOpsFamily kFamily{"dropout"};

  // y[r, e] = x[r, e] * DropoutFactor(key, r, e) for [rows, row_size]; y may
  // alias x. The same call computes the backward pass (dx from dy), since the
  // mask is a pure function of the key. INVALID_ARGUMENT on negative sizes or
  // unless 0 <= p < 1.
  virtual absl::Status Dropout(int rows, int64_t row_size,
                               const DropoutKey& key, const float* x,
                               float* y) = 0;
};

}  // namespace ferry

#endif  // FERRY_COMPUTE_DROPOUT_OPS_H_

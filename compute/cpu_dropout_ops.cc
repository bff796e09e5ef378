// The CPU backend's dropout ops (compute/dropout_ops.h): kernel_math.h's
// DropoutFactor per element.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "common/status_macros.h"
#include "compute/cpu_layer_ops.h"
#include "compute/dropout_ops.h"
#include "compute/layer_checks.h"

namespace ferry {
namespace {

void DropoutLoop(int rows, int64_t row_size, const DropoutKey& key,
                 const float* x, float* y) {
  for (int r = 0; r < rows; ++r) {
    const size_t base = static_cast<size_t>(r) * row_size;
    for (int64_t e = 0; e < row_size; ++e) {
      y[base + e] = x[base + e] * DropoutFactor(key, r, e);
    }
  }
}

// Validates, then runs the loops above.
class CpuDropoutOps final : public DropoutOps {
 public:
  absl::Status Dropout(int rows, int64_t row_size, const DropoutKey& key,
                       const float* x, float* y) override {
    RETURN_IF_ERROR(ValidateDropout(rows, row_size, key));
    DropoutLoop(rows, row_size, key, x, y);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<LayerOps> MakeCpuDropoutOps() {
  return std::make_unique<CpuDropoutOps>();
}

}  // namespace ferry

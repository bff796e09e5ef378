// The CUDA backend's dropout ops (compute/dropout_ops.h).
#include "compute/dropout_ops.h"

#include <memory>

#include "common/status_macros.h"
#include "compute/cuda/cuda_layer_ops.h"
#include "compute/cuda/layer_kernels.h"
#include "compute/layer_checks.h"

namespace ferry {
namespace {

class CudaDropoutOps final : public DropoutOps {
 public:
  explicit CudaDropoutOps(CudaStream s) : s_(s) {}

  absl::Status Dropout(int rows, int64_t row_size, const DropoutKey& key,
                       const float* x, float* y) override {
    RETURN_IF_ERROR(ValidateDropout(rows, row_size, key));
    RETURN_IF_ERROR(s_.Activate());
    return FERRY_CUDA_CHECK(
        kernels::LaunchDropout(rows, row_size, key, x, y, s_.stream));
  }

 private:
  CudaStream s_;
};

}  // namespace

std::unique_ptr<LayerOps> MakeCudaDropoutOps(CudaStream stream) {
  return std::make_unique<CudaDropoutOps>(stream);
}

}  // namespace ferry

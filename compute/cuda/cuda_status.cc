#include "compute/cuda/cuda_status.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ferry {

absl::Status CudaErrorStatus(bool out_of_memory, const char* api,
                             const char* file, int line, const char* error) {
  (void)cudaGetLastError();
  std::string message =
      absl::StrCat(api, " failed at ", file, ":", line, ": ", error);
  return out_of_memory ? absl::ResourceExhaustedError(std::move(message))
                       : absl::InternalError(std::move(message));
}

absl::Status ToStatus(cudaError_t err, const char* api, const char* file,
                      int line) {
  if (err == cudaSuccess) return absl::OkStatus();
  return CudaErrorStatus(err == cudaErrorMemoryAllocation, api, file, line,
                         cudaGetErrorString(err));
}

}  // namespace ferry

// The one place where CUDA runtime failures become absl::Status, for the CUDA
// backend and its layer op families: RESOURCE_EXHAUSTED for allocation
// failures, INTERNAL otherwise, naming the call and where it was made.
#ifndef FERRY_COMPUTE_CUDA_CUDA_STATUS_H_
#define FERRY_COMPUTE_CUDA_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace ferry {

// Clears the runtime's (non-sticky) last error, so that the next launch
// check does not report this failure a second time, and returns the status.
absl::Status CudaErrorStatus(bool out_of_memory, const char* api,
                             const char* file, int line, const char* error);

absl::Status ToStatus(cudaError_t err, const char* api, const char* file,
                      int line);

// FERRY_CUDA_CHECK(cudaFoo(...)): a Status naming the call and where it was
// made (any ToStatus overload in scope).
#define FERRY_CUDA_CHECK(call) ToStatus((call), #call, __FILE__, __LINE__)

// The device and stream a backend queues its work on.
struct CudaStream {
  int device = 0;
  cudaStream_t stream = nullptr;

  // Makes `device` current for the calling thread (a backend may move
  // between threads, and a fresh thread starts on device 0).
  absl::Status Activate() const {
    return FERRY_CUDA_CHECK(cudaSetDevice(device));
  }
};

}  // namespace ferry

#endif  // FERRY_COMPUTE_CUDA_CUDA_STATUS_H_

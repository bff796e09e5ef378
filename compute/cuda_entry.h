// Entry points of the CUDA backend (common/cuda/), linked only when the build
// found nvcc. Callers go through MakeBackend() in compute_backend.h.
#ifndef FERRY_COMPUTE_CUDA_ENTRY_H_
#define FERRY_COMPUTE_CUDA_ENTRY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "compute/compute_backend.h"

namespace ferry {

// Number of visible CUDA devices; 0 when the driver is missing or no device.
int CudaDeviceCount();

// Creates a backend on `device` with its own stream and cuBLAS handle.
// UNAVAILABLE when there is no such device or initialization fails.
absl::StatusOr<std::unique_ptr<ComputeBackend>> MakeCudaBackend(int device);

}  // namespace ferry

#endif  // FERRY_COMPUTE_CUDA_ENTRY_H_

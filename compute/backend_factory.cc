#include <algorithm>

#include "compute/compute_backend.h"
#include "compute/cpu_backend.h"

#if FERRY_HAVE_CUDA
#include "compute/cuda_entry.h"
#endif

namespace ferry {

absl::StatusOr<DeviceChoice> ParseDeviceChoice(const std::string& text) {
  if (text == "auto") return DeviceChoice::kAuto;
  if (text == "cpu") return DeviceChoice::kCpu;
  if (text == "cuda" || text == "gpu") return DeviceChoice::kCuda;
  return absl::InvalidArgumentError("unknown device '" + text +
                                    "': expected auto, cpu or cuda");
}

bool CudaDeviceAvailable() {
#if FERRY_HAVE_CUDA
  return CudaDeviceCount() > 0;
#else
  return false;
#endif
}

absl::StatusOr<std::unique_ptr<ComputeBackend>> MakeBackend(DeviceChoice choice,
                                                            int cpu_threads,
                                                            int cuda_ordinal) {
  if (choice == DeviceChoice::kCpu ||
      (choice == DeviceChoice::kAuto && !CudaDeviceAvailable())) {
    return MakeCpuBackend(cpu_threads);
  }
#if FERRY_HAVE_CUDA
  if (CudaDeviceCount() == 0) {
    return absl::UnavailableError(
        "--device cuda: no CUDA device is visible (check nvidia-smi and "
        "CUDA_VISIBLE_DEVICES), or use --device cpu");
  }
  return MakeCudaBackend(std::max(0, cuda_ordinal) % CudaDeviceCount());
#else
  (void)cuda_ordinal;
  return absl::UnavailableError(
      "--device cuda: this binary was built without CUDA (nvcc was not found "
      "at configure time); rebuild with the CUDA Toolkit or use --device cpu");
#endif
}

}  // namespace ferry

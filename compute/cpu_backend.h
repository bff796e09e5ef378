// CPU compute backend on OpenBLAS (cblas_sgemm) with plain loops for the
// elementwise kernels. Buffers are host memory.
//
// Thread safety: one thread at a time per instance. The BLAS thread count is
// process-wide in OpenBLAS; the constructor sets it.
#ifndef FERRY_COMPUTE_CPU_BACKEND_H_
#define FERRY_COMPUTE_CPU_BACKEND_H_

#include <memory>

#include "compute/compute_backend.h"

namespace ferry {

// Creates a CPU backend that runs BLAS with `threads` threads (>= 1).
std::unique_ptr<ComputeBackend> MakeCpuBackend(int threads = 1);

}  // namespace ferry

#endif  // FERRY_COMPUTE_CPU_BACKEND_H_

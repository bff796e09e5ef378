// The registry of dense optimizers: one entry per OptimizerKind naming its
// update function on each backend. The per-element math of every update is a
// FERRY_HD function of compute/dense_optimizer_math.h, which the CPU loops
// (compute/cpu_optimizers.cc) and the CUDA kernels
// (compute/cuda/dense_optimizer_kernels.cu) both call, so the two backends
// compute the same thing and the CPU tests of the math cover the GPU's.
//
// Adding an optimizer: its element function in dense_optimizer_math.h, its
// CPU loop in cpu_optimizers.cc, its CUDA launch in
// cuda/dense_optimizer_kernels.cu, and one line in the table of
// dense_optimizers.cc (its kind, name and state count come from
// common/optimizer_config.h, which the job protocol carries).
//
// Thread safety: the registry is immutable; RunDenseUpdate uses the backend
// (one thread at a time).
#ifndef FERRY_COMPUTE_DENSE_OPTIMIZERS_H_
#define FERRY_COMPUTE_DENSE_OPTIMIZERS_H_

#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/optimizer_config.h"
#include "compute/compute_backend.h"
#include "compute/dense_optimizer_math.h"

namespace ferry {

// One update of args.n elements on the CPU (host memory).
using CpuDenseUpdateFn = void (*)(const OptimizerStepParams& p,
                                  const DenseUpdateArgs& args);
// The same update queued on a CUDA stream (`stream` is a cudaStream_t);
// returns the launch's cudaError_t as an int (0: success). Plain C++ so that
// this header needs no CUDA header.
using CudaDenseUpdateFn = int (*)(const OptimizerStepParams& p,
                                  const DenseUpdateArgs& args, void* stream);

struct DenseOptimizer {
  OptimizerKind kind = OptimizerKind::kSgd;
  CpuDenseUpdateFn cpu = nullptr;
  CudaDenseUpdateFn cuda = nullptr;  // null in a build without CUDA
};

// Every registered optimizer, one per kind.
std::span<const DenseOptimizer> DenseOptimizers();

// The registered optimizer of `kind`; INVALID_ARGUMENT when there is none.
absl::StatusOr<const DenseOptimizer*> FindDenseOptimizer(OptimizerKind kind);

// One update of `optimizer` on `backend`: param, state and grad are
// args.n-element ranges of the backend's memory (the first
// OptimizerStateBuffers(kind) state pointers set). INVALID_ARGUMENT for
// p.step < 1 (nothing applied); zero elements apply nothing.
absl::Status RunDenseUpdate(ComputeBackend& backend,
                            const DenseOptimizer& optimizer,
                            const OptimizerStepParams& p,
                            const DenseUpdateArgs& args);

}  // namespace ferry

#endif  // FERRY_COMPUTE_DENSE_OPTIMIZERS_H_

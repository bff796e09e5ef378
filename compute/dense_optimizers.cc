#include "compute/dense_optimizers.h"

#include "absl/strings/str_cat.h"
#include "compute/cpu_optimizers.h"

#if FERRY_HAVE_CUDA
#include "compute/cuda/dense_optimizer_kernels.h"
#define FERRY_CUDA_UPDATE(fn) &kernels::fn
#else
#define FERRY_CUDA_UPDATE(fn) nullptr
#endif

namespace ferry {
namespace {

// The registrations: one line per optimizer.
constexpr DenseOptimizer kDenseOptimizers[] = {
    {OptimizerKind::kSgd, &cpu::SgdUpdate, FERRY_CUDA_UPDATE(SgdUpdate)},
    {OptimizerKind::kMomentum, &cpu::MomentumUpdate,
     FERRY_CUDA_UPDATE(MomentumUpdate)},
    {OptimizerKind::kAdam, &cpu::AdamUpdate, FERRY_CUDA_UPDATE(AdamUpdate)},
    {OptimizerKind::kAdamW, &cpu::AdamWUpdate, FERRY_CUDA_UPDATE(AdamWUpdate)},
};

}  // namespace

std::span<const DenseOptimizer> DenseOptimizers() { return kDenseOptimizers; }

absl::StatusOr<const DenseOptimizer*> FindDenseOptimizer(OptimizerKind kind) {
  for (const DenseOptimizer& optimizer : kDenseOptimizers) {
    if (optimizer.kind == kind) return &optimizer;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("optimizer '", OptimizerKindName(kind),
                   "' has no dense update registered"));
}

absl::Status RunDenseUpdate(ComputeBackend& backend,
                            const DenseOptimizer& optimizer,
                            const OptimizerStepParams& p,
                            const DenseUpdateArgs& args) {
  if (p.step < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(OptimizerKindName(optimizer.kind),
                     " update: step must be >= 1, got ", p.step));
  }
  if (args.n == 0) return absl::OkStatus();
  return backend.DenseOptimizerUpdate(optimizer, p, args);
}

}  // namespace ferry

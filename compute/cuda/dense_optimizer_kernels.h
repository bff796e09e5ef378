// The CUDA launches of the dense optimizers (compute/dense_optimizers.h), one
// per registered optimizer, with the registry's CudaDenseUpdateFn signature:
// `stream` is a cudaStream_t, the result a cudaError_t as an int (launch
// errors only, as in kernels.h). Plain C++ so that the registry
// (dense_optimizers.cc, g++) includes it without CUDA headers. Each kernel
// applies the optimizer's element function of compute/dense_optimizer_math.h
// to every element, as the CPU loops (compute/cpu_optimizers.cc) do.
#ifndef FERRY_COMPUTE_CUDA_DENSE_OPTIMIZER_KERNELS_H_
#define FERRY_COMPUTE_CUDA_DENSE_OPTIMIZER_KERNELS_H_

#include "compute/dense_optimizer_math.h"

namespace ferry::kernels {

int SgdUpdate(const OptimizerStepParams& p, const DenseUpdateArgs& args,
              void* stream);
int MomentumUpdate(const OptimizerStepParams& p, const DenseUpdateArgs& args,
                   void* stream);
int AdamUpdate(const OptimizerStepParams& p, const DenseUpdateArgs& args,
               void* stream);
int AdamWUpdate(const OptimizerStepParams& p, const DenseUpdateArgs& args,
                void* stream);

}  // namespace ferry::kernels

#endif  // FERRY_COMPUTE_CUDA_DENSE_OPTIMIZER_KERNELS_H_

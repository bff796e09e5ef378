// The CPU backend's layer op families (compute/layer_ops.h), one file each;
// MakeCpuBackend adds every one of them to its LayerOpsSet. The ops work on
// host memory and validate their arguments (compute/layer_checks.h).
#ifndef FERRY_COMPUTE_CPU_LAYER_OPS_H_
#define FERRY_COMPUTE_CPU_LAYER_OPS_H_

#include <memory>

#include "compute/layer_ops.h"

namespace ferry {

std::unique_ptr<LayerOps> MakeCpuConvOps();       // cpu_conv_ops.cc
std::unique_ptr<LayerOps> MakeCpuPoolOps();       // cpu_pool_ops.cc
std::unique_ptr<LayerOps> MakeCpuDropoutOps();    // cpu_dropout_ops.cc
std::unique_ptr<LayerOps> MakeCpuBatchNormOps();  // cpu_batch_norm_ops.cc

}  // namespace ferry

#endif  // FERRY_COMPUTE_CPU_LAYER_OPS_H_

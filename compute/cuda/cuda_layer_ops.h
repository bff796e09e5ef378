// The CUDA backend's layer op families (compute/layer_ops.h), one file each
// (compute/cuda/<family>_ops.cc); MakeCudaBackend adds every one of them to
// its LayerOpsSet. The ops validate their arguments
// (compute/layer_checks.h), make the backend's device current and queue the
// kernels of layer_kernels.h on its stream.
#ifndef FERRY_COMPUTE_CUDA_CUDA_LAYER_OPS_H_
#define FERRY_COMPUTE_CUDA_CUDA_LAYER_OPS_H_

#include <memory>

#include "compute/cuda/cuda_status.h"
#include "compute/layer_ops.h"

namespace ferry {

std::unique_ptr<LayerOps> MakeCudaConvOps(CudaStream stream);
std::unique_ptr<LayerOps> MakeCudaPoolOps(CudaStream stream);
std::unique_ptr<LayerOps> MakeCudaDropoutOps(CudaStream stream);
std::unique_ptr<LayerOps> MakeCudaBatchNormOps(CudaStream stream);

}  // namespace ferry

#endif  // FERRY_COMPUTE_CUDA_CUDA_LAYER_OPS_H_

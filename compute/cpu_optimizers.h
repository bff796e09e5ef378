// The CPU loops of the dense optimizers (compute/dense_optimizers.h), one per
// registered optimizer, over host memory. Each applies the optimizer's
// element function of compute/dense_optimizer_math.h to every element.
//
// Thread safety: pure functions of their arguments and the buffers.
#ifndef FERRY_COMPUTE_CPU_OPTIMIZERS_H_
#define FERRY_COMPUTE_CPU_OPTIMIZERS_H_

#include "compute/dense_optimizer_math.h"

namespace ferry::cpu {

// SGD: param -= lr * (g + wd * param). No state.
void SgdUpdate(const OptimizerStepParams& p, const DenseUpdateArgs& args);
// Momentum (PyTorch semantics, Nesterov when p.nesterov): state[0] is the
// velocity.
void MomentumUpdate(const OptimizerStepParams& p, const DenseUpdateArgs& args);
// Adam (weight decay added to the gradient) and AdamW (decoupled): state[0]
// and state[1] are the first and second moments.
void AdamUpdate(const OptimizerStepParams& p, const DenseUpdateArgs& args);
void AdamWUpdate(const OptimizerStepParams& p, const DenseUpdateArgs& args);

}  // namespace ferry::cpu

#endif  // FERRY_COMPUTE_CPU_OPTIMIZERS_H_

#include "compute/cpu_optimizers.h"

#include <cstddef>

namespace ferry::cpu {
namespace {

// The loops read the step's scalars from locals and the buffers through
// restrict pointers (callers never pass overlapping buffers), so that the
// compiler vectorizes them.
void Adam(const OptimizerStepParams& p, bool decoupled,
          const DenseUpdateArgs& args) {
  const AdamScalars s = AdamScalarsOf(p, decoupled);
  const size_t n = args.n;
  const float* __restrict g = args.grad;
  float* __restrict mm = args.state[0];
  float* __restrict vv = args.state[1];
  float* __restrict w = args.param;
  for (size_t i = 0; i < n; ++i) AdamElement(s, g[i], mm[i], vv[i], w[i]);
}

}  // namespace

void SgdUpdate(const OptimizerStepParams& p, const DenseUpdateArgs& args) {
  const float lr = p.lr, wd = p.weight_decay;
  const size_t n = args.n;
  const float* __restrict g = args.grad;
  float* __restrict w = args.param;
  for (size_t i = 0; i < n; ++i) w[i] = SgdElement(lr, wd, g[i], w[i]);
}

void MomentumUpdate(const OptimizerStepParams& p, const DenseUpdateArgs& args) {
  const float lr = p.lr, wd = p.weight_decay, momentum = p.momentum;
  const size_t n = args.n;
  const float* __restrict g = args.grad;
  float* __restrict vel = args.state[0];
  float* __restrict w = args.param;
  if (p.nesterov) {
    for (size_t i = 0; i < n; ++i)
      MomentumElement(lr, wd, momentum, true, g[i], vel[i], w[i]);
  } else {
    for (size_t i = 0; i < n; ++i)
      MomentumElement(lr, wd, momentum, false, g[i], vel[i], w[i]);
  }
}

void AdamUpdate(const OptimizerStepParams& p, const DenseUpdateArgs& args) {
  Adam(p, /*decoupled=*/false, args);
}

void AdamWUpdate(const OptimizerStepParams& p, const DenseUpdateArgs& args) {
  Adam(p, /*decoupled=*/true, args);
}

}  // namespace ferry::cpu

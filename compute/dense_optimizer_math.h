// Per-element math of the dense optimizers (SGD, momentum, Adam/AdamW),
// shared by the CPU backend (g++) and the CUDA kernels (nvcc): each is an
// inline pure function marked FERRY_HD, so the CPU tests of these functions
// prove what the GPU computes too (to the last bits: nvcc may fuse a
// multiply and an add; x86-64 host builds without -march cannot).
//
// Thread safety: pure functions, no state.
#ifndef FERRY_COMPUTE_DENSE_OPTIMIZER_MATH_H_
#define FERRY_COMPUTE_DENSE_OPTIMIZER_MATH_H_

#include <cmath>

#include "compute/kernel_math.h"

namespace ferry {

// One step's scalars of Adam: the bias corrections folded into step_size =
// lr / (1 - beta1^t) and inv_sqrt_bc2 = 1 / sqrt(1 - beta2^t), computed once
// per step on the host.
struct AdamScalars {
  float lr = 0.0f;
  float weight_decay = 0.0f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
  float step_size = 0.0f;
  float inv_sqrt_bc2 = 1.0f;
  bool decoupled = false;  // AdamW: param -= lr * weight_decay * param first
};

// param -= lr * (grad + weight_decay * param).
FERRY_HD inline float SgdElement(float lr, float weight_decay, float grad,
                                 float param) {
  return param - lr * (grad + weight_decay * param);
}

// Heavy-ball momentum (Nesterov when `nesterov`), weight decay added to the
// gradient: velocity = momentum * velocity + g; param -= lr * (nesterov ?
// g + momentum * velocity : velocity).
FERRY_HD inline void MomentumElement(float lr, float weight_decay,
                                     float momentum, bool nesterov, float grad,
                                     float& velocity, float& param) {
  const float g = grad + weight_decay * param;
  const float v = momentum * velocity + g;
  velocity = v;
  param -= lr * (nesterov ? g + momentum * v : v);
}

// Adam (weight decay added to the gradient) or AdamW (decoupled), in place
// on m, v and param.
FERRY_HD inline void AdamElement(const AdamScalars& s, float grad, float& m,
                                 float& v, float& param) {
  float g = grad;
  float p = param;
  if (s.decoupled) {
    p -= s.lr * s.weight_decay * p;
  } else {
    g += s.weight_decay * p;
  }
  const float mi = s.beta1 * m + (1.0f - s.beta1) * g;
  const float vi = s.beta2 * v + (1.0f - s.beta2) * g * g;
  m = mi;
  v = vi;
  param = p - s.step_size * mi / (std::sqrt(vi) * s.inv_sqrt_bc2 + s.epsilon);
}

}  // namespace ferry

#endif  // FERRY_COMPUTE_DENSE_OPTIMIZER_MATH_H_

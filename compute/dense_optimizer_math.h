// Per-element math of the dense optimizers (SGD, momentum, Adam/AdamW),
// shared by the CPU loops (compute/cpu_optimizers.cc, g++) and the CUDA
// kernels (compute/cuda/dense_optimizer_kernels.cu, nvcc): each is an
// inline pure function marked FERRY_HD, so the CPU tests of these functions
// prove what the GPU computes too (to the last bits: nvcc may fuse a
// multiply and an add; x86-64 host builds without -march cannot).
//
// Thread safety: pure functions, no state.
#ifndef FERRY_COMPUTE_DENSE_OPTIMIZER_MATH_H_
#define FERRY_COMPUTE_DENSE_OPTIMIZER_MATH_H_

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "compute/kernel_math.h"

namespace ferry {

// Hyper-parameters of one optimizer step, shared by every update kernel.
struct OptimizerStepParams {
  float lr = 0.01f;
  float weight_decay = 0.0f;  // L2 added to the gradient (SGD, momentum, Adam)
                              // or decoupled (AdamW)
  float momentum = 0.9f;
  bool nesterov = false;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
  int64_t step =
      1;  // 1-based count of updates applied (>= 1), for Adam bias correction
};

// Most state buffers of the parameters' size one dense optimizer keeps.
inline constexpr int kMaxDenseOptimizerState = 4;

// The buffers of one update over n elements, all in the backend's memory
// space: state[0 .. the optimizer's state count) are its state buffers (the
// rest null). Buffers never overlap.
struct DenseUpdateArgs {
  size_t n = 0;
  const float* grad = nullptr;
  float* state[kMaxDenseOptimizerState] = {};
  float* param = nullptr;
};

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

// The step's Adam scalars, computed once on the host. Requires p.step >= 1
// (the registry's RunDenseUpdate checks it).
inline AdamScalars AdamScalarsOf(const OptimizerStepParams& p, bool decoupled) {
  AdamScalars s;
  s.lr = p.lr;
  s.weight_decay = p.weight_decay;
  s.beta1 = p.beta1;
  s.beta2 = p.beta2;
  s.epsilon = p.epsilon;
  const float bc1 = 1.0f - std::pow(p.beta1, static_cast<float>(p.step));
  const float bc2 = 1.0f - std::pow(p.beta2, static_cast<float>(p.step));
  s.step_size = p.lr / bc1;
  s.inv_sqrt_bc2 = 1.0f / std::sqrt(bc2);
  s.decoupled = decoupled;
  return s;
}

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

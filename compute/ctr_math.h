// Per-element math of CTR models (DLRM, model/dlrm_model.h): the sigmoid and
// binary cross-entropy head and the index arithmetic of the pairwise
// dot-product interaction. Inline FERRY_HD functions like kernel_math.h's, so a
// CUDA kernel can call the same code the host tests check.
//
// Thread safety: pure functions, no state.
#ifndef FERRY_COMPUTE_CTR_MATH_H_
#define FERRY_COMPUTE_CTR_MATH_H_

#include <cmath>
#include <cstdint>

#include "compute/kernel_math.h"  // FERRY_HD

namespace ferry {

// 1 / (1 + exp(-x)) without overflow: exp is only taken of -|x|, so a large
// |x| gives exactly 0 or 1 and never NaN.
FERRY_HD inline float StableSigmoid(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
  const float e = expf(x);
  return e / (1.0f + e);
}

// Binary cross-entropy of the probability sigmoid(logit) against `label` in
// [0, 1], from the logit (PyTorch's BCEWithLogitsLoss):
//   -y log s(x) - (1 - y) log(1 - s(x)) = max(x, 0) - x y + log1p(exp(-|x|)),
// in double: finite for every finite logit (|x| for a confident mistake,
// ~exp(-|x|) for a confident hit) where log(sigmoid) would give -inf.
FERRY_HD inline double BceWithLogit(float logit, float label) {
  const double x = logit;
  const double y = label;
  return (x > 0.0 ? x : 0.0) - x * y + log1p(exp(-fabs(x)));
}

// d BceWithLogit / d logit = sigmoid(logit) - label.
FERRY_HD inline float BceWithLogitGrad(float logit, float label) {
  return StableSigmoid(logit) - label;
}

// The DLRM "dot" interaction over `vectors` vectors (the bottom MLP's output,
// then one pooled embedding per field) keeps the dot products of the strictly
// lower triangle, pairs (i, j) with i > j, in row order: (1,0), (2,0), (2,1),
// (3,0), ... (facebookresearch/dlrm's interact_features with
// arch_interaction_itself = False).
FERRY_HD inline int64_t DotInteractionPairs(int64_t vectors) {
  return vectors * (vectors - 1) / 2;
}
// Position of pair (i, j), i > j >= 0, in that order.
FERRY_HD inline int64_t DotInteractionIndex(int64_t i, int64_t j) {
  return i * (i - 1) / 2 + j;
}

}  // namespace ferry

#endif  // FERRY_COMPUTE_CTR_MATH_H_

// Per-element math of the embedding rows' optimizers and initializer, shared
// by the PS shards' sparse tables, the ring members' local tables and (later)
// CUDA kernels: inline FERRY_HD pure functions, so the CPU tests prove what
// every caller computes.
//
// A row is `dim` values followed by its optimizer state (RowStateFloats):
//  - SGD:               w -= lr * g; no state.
//  - row-wise Adagrad:  one accumulator per row (FBGEMM's rowwise Adagrad):
//                       a += mean(g^2 over the row);
//                       w -= lr * g / (sqrt(a) + epsilon).
//  - FTRL-Proximal:     per element z and n (McMahan et al., KDD 2013, with
//                       the learning-rate power -1/2):
//                       sigma = (sqrt(n + g^2) - sqrt(n)) / alpha;
//                       z += g - sigma * w;  n += g^2;
//                       w = 0 if |z| <= l1, else
//                       -(z - sign(z) * l1) / ((beta + sqrt(n)) / alpha + l2).
// Gradients are the mean over the step's samples, as for dense parameters.
//
// Thread safety: pure functions, no state.
#ifndef FERRY_COMPUTE_ROW_OPTIMIZER_MATH_H_
#define FERRY_COMPUTE_ROW_OPTIMIZER_MATH_H_

#include <cmath>
#include <cstdint>

#include "compute/kernel_math.h"

namespace ferry {

enum class RowOptimizerKind { kSgd, kAdagrad, kFtrl };

// The hyper-parameters of one row update.
struct RowOptimizerParams {
  RowOptimizerKind kind = RowOptimizerKind::kAdagrad;
  float lr = 0.01f;                  // FTRL: alpha
  float epsilon = 1e-8f;             // Adagrad
  float initial_accumulator = 0.0f;  // Adagrad: a of a new row
  float beta = 1.0f;                 // FTRL
  float l1 = 0.0f;                   // FTRL
  float l2 = 0.0f;                   // FTRL
};

// Floats of optimizer state after a row's `dim` values.
FERRY_HD inline int RowStateFloats(RowOptimizerKind kind, int dim) {
  switch (kind) {
    case RowOptimizerKind::kSgd:
      return 0;
    case RowOptimizerKind::kAdagrad:
      return 1;
    case RowOptimizerKind::kFtrl:
      return 2 * dim;  // z[dim], then n[dim]
  }
  return 0;
}

// Initial value of element `element` of row `id` of table `table`: uniform
// in [-scale, scale), a pure function of (seed, table, id, element), so
// every shard, ring member and single process creates the same row.
FERRY_HD inline float InitialRowValue(uint64_t seed, int32_t table, uint64_t id,
                                      int32_t element, float scale) {
  uint64_t h = Mix64(seed ^ 0xbb67ae8584caa73bull);
  h = Mix64(h ^ static_cast<uint64_t>(static_cast<uint32_t>(table)));
  h = Mix64(h ^ id);
  h = Mix64(h ^ static_cast<uint64_t>(static_cast<uint32_t>(element)));
  // 24 random bits -> [0, 1), exact in float.
  const float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
  return (2.0f * u - 1.0f) * scale;
}

// The FTRL weight given its z and n (the closed form above).
FERRY_HD inline float FtrlWeight(float z, float n,
                                 const RowOptimizerParams& p) {
  if (std::fabs(z) <= p.l1) return 0.0f;
  const float shrunk = z > 0.0f ? z - p.l1 : z + p.l1;
  return -shrunk / ((p.beta + std::sqrt(n)) / p.lr + p.l2);
}

// The z that makes FtrlWeight(z, n) == w when l1 == 0: how a row created
// with an initial value w (n = 0) starts.
FERRY_HD inline float FtrlZForWeight(float w, float n,
                                     const RowOptimizerParams& p) {
  return -w * ((p.beta + std::sqrt(n)) / p.lr + p.l2);
}

// Row-wise Adagrad's accumulator after a row's gradient with sum of squares
// `sum_sq` over `dim` elements.
FERRY_HD inline float AdagradAccumulate(float accumulator, float sum_sq,
                                        int dim) {
  return accumulator + sum_sq / static_cast<float>(dim);
}

// Row-wise Adagrad's new value of one element, given the row's updated
// accumulator.
FERRY_HD inline float AdagradElement(float w, float g, float accumulator,
                                     const RowOptimizerParams& p) {
  return w - p.lr * g / (std::sqrt(accumulator) + p.epsilon);
}

// One FTRL element: updates *z and *n and returns the new weight.
FERRY_HD inline float FtrlElement(float w, float g, float* z, float* n,
                                  const RowOptimizerParams& p) {
  const float n_new = *n + g * g;
  const float sigma = (std::sqrt(n_new) - std::sqrt(*n)) / p.lr;
  *z += g - sigma * w;
  *n = n_new;
  return FtrlWeight(*z, *n, p);
}

// Applies one update to a row: `row` is dim values then its state; `grad`
// the row's dim mean gradients.
FERRY_HD inline void ApplyRowUpdate(float* row, const float* grad, int dim,
                                    const RowOptimizerParams& p) {
  switch (p.kind) {
    case RowOptimizerKind::kSgd:
      for (int i = 0; i < dim; ++i) row[i] -= p.lr * grad[i];
      return;
    case RowOptimizerKind::kAdagrad: {
      float sum_sq = 0.0f;
      for (int i = 0; i < dim; ++i) sum_sq += grad[i] * grad[i];
      const float a = AdagradAccumulate(row[dim], sum_sq, dim);
      row[dim] = a;
      for (int i = 0; i < dim; ++i)
        row[i] = AdagradElement(row[i], grad[i], a, p);
      return;
    }
    case RowOptimizerKind::kFtrl:
      for (int i = 0; i < dim; ++i) {
        row[i] =
            FtrlElement(row[i], grad[i], &row[dim + i], &row[2 * dim + i], p);
      }
      return;
  }
}

// Writes a new row of `id`: its initial values and the optimizer state that
// goes with them (Adagrad: the initial accumulator; FTRL: n = 0 and the z
// that yields the initial values, which l1 > 0 would shrink: such tables
// start from zeros, the usual FTRL start).
// Whether new rows start at zero under `p` (FTRL with l1 > 0) rather than
// at InitialRowValue.
FERRY_HD inline bool RowsStartAtZero(const RowOptimizerParams& p) {
  return p.kind == RowOptimizerKind::kFtrl && p.l1 > 0.0f;
}

// The scale of initial values: `scale`, or 1 / sqrt(dim) when it is 0.
inline float ResolvedInitScale(float scale, int dim) {
  return scale > 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(dim));
}

FERRY_HD inline void InitRow(float* row, uint64_t seed, int32_t table,
                             uint64_t id, int dim, float scale,
                             const RowOptimizerParams& p) {
  const bool zero = RowsStartAtZero(p);
  for (int i = 0; i < dim; ++i) {
    row[i] = zero ? 0.0f : InitialRowValue(seed, table, id, i, scale);
  }
  switch (p.kind) {
    case RowOptimizerKind::kSgd:
      return;
    case RowOptimizerKind::kAdagrad:
      row[dim] = p.initial_accumulator;
      return;
    case RowOptimizerKind::kFtrl:
      for (int i = 0; i < dim; ++i) {
        row[2 * dim + i] = 0.0f;
        row[dim + i] = FtrlZForWeight(row[i], 0.0f, p);
      }
      return;
  }
}

}  // namespace ferry

#endif  // FERRY_COMPUTE_ROW_OPTIMIZER_MATH_H_

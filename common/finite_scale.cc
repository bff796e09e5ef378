#include "common/finite_scale.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace ferry {
namespace {

// Small enough to stay in L1 between the check and the scaling.
constexpr int64_t kChunk = 2048;
constexpr uint32_t kExponentMask = 0x7f800000u;  // all ones: NaN or inf

// Whether x[begin, end) holds a value that is NaN or infinite: an integer
// OR over the exponent bits, which the compiler vectorizes.
bool AnyNotFinite(const float* x, int64_t begin, int64_t end) {
  uint32_t not_finite = 0;
  for (int64_t i = begin; i < end; ++i) {
    const uint32_t bits = std::bit_cast<uint32_t>(x[i]);
    not_finite |=
        static_cast<uint32_t>((bits & kExponentMask) == kExponentMask);
  }
  return not_finite != 0;
}

}  // namespace

int64_t FirstNonFinite(const float* x, int64_t n) {
  for (int64_t begin = 0; begin < n; begin += kChunk) {
    const int64_t end = std::min(n, begin + kChunk);
    if (!AnyNotFinite(x, begin, end)) continue;
    for (int64_t i = begin; i < end; ++i) {
      if (!std::isfinite(x[i])) return i;
    }
  }
  return -1;
}

namespace {

// The first element that is not finite, or -1 after `op` was applied to
// every element, chunk by chunk while the chunk is in L1.
template <typename Op>
int64_t ApplyIfFinite(float* x, int64_t n, Op op) {
  for (int64_t begin = 0; begin < n; begin += kChunk) {
    const int64_t end = std::min(n, begin + kChunk);
    if (AnyNotFinite(x, begin, end)) {
      for (int64_t i = begin; i < end; ++i) {
        if (!std::isfinite(x[i])) return i;
      }
    }
    for (int64_t i = begin; i < end; ++i) x[i] = op(x[i]);
  }
  return -1;
}

}  // namespace

int64_t ScaleIfFinite(float* x, int64_t n, float scale) {
  return ApplyIfFinite(x, n, [scale](float v) { return v * scale; });
}

int64_t DivideIfFinite(float* x, int64_t n, float divisor) {
  return ApplyIfFinite(x, n, [divisor](float v) { return v / divisor; });
}

}  // namespace ferry

// ScaleIfFinite and DivideIfFinite: check a gradient range for values that
// are not finite and scale it, in one pass over memory that the compiler
// vectorizes (the check is an integer OR over the exponent bits, chunk by
// chunk, so a range in cache is read twice and memory once).
#ifndef FERRY_COMMON_FINITE_SCALE_H_
#define FERRY_COMMON_FINITE_SCALE_H_

#include <cstdint>

namespace ferry {

// Multiplies x[0, n) by `scale` in place when every element is finite and
// returns -1. Otherwise returns the index of the first element that is NaN
// or infinite, which is left as it was; elements before it may have been
// scaled already (the caller refuses the whole range). n <= 0: returns -1.
int64_t ScaleIfFinite(float* x, int64_t n, float scale);

// ScaleIfFinite dividing by `divisor` (x[i] / divisor, rounded as that
// division is, not as a multiplication by its reciprocal).
int64_t DivideIfFinite(float* x, int64_t n, float divisor);

// The index of the first element of x[0, n) that is NaN or infinite, or
// -1 when every one is finite (the same vectorized check, without the
// scaling).
int64_t FirstNonFinite(const float* x, int64_t n);

}  // namespace ferry

#endif  // FERRY_COMMON_FINITE_SCALE_H_

// Zipf-distributed ranks by rejection-inversion (Hörmann and Derflinger,
// "Rejection-inversion to generate variates from monotone discrete
// distributions", 1996): P(k) proportional to k^-exponent for k in [1, n],
// O(1) time and memory per draw whatever n (no tables), exact for every
// exponent > 0 (1 included).
//
// The caller supplies uniforms in [0, 1) (so that a draw is a pure function
// of them: see CounterRng); a draw takes one uniform most of the time and
// rarely a few more.
#ifndef FERRY_DATA_ZIPF_SAMPLER_H_
#define FERRY_DATA_ZIPF_SAMPLER_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "compute/kernel_math.h"

namespace ferry {

// A deterministic stream of 64-bit values from (seed, stream id): splitmix64
// over a counter, so streams are independent of each other and of the order
// in which they are used.
class CounterRng {
 public:
  CounterRng(uint64_t seed, uint64_t stream)
      : state_(Mix64(Mix64(seed ^ 0x243f6a8885a308d3ull) ^ stream)) {}
  uint64_t Next() { return Mix64(state_ += 0x9e3779b97f4a7c15ull); }
  // Uniform in [0, 1) with 53 bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Standard normal (Box-Muller, our own arithmetic: the same on every
  // platform with IEEE doubles and a correctly rounded log, sqrt, cos).
  double Normal();

 private:
  uint64_t state_;
};

class ZipfSampler {
 public:
  // INVALID_ARGUMENT unless n >= 1 and exponent > 0 (both finite).
  static absl::StatusOr<ZipfSampler> Create(int64_t n, double exponent);

  // A rank in [1, n].
  int64_t Sample(CounterRng& rng) const;

  int64_t n() const { return n_; }
  double exponent() const { return exponent_; }

 private:
  ZipfSampler(int64_t n, double exponent);
  double H(double x) const;
  double HIntegral(double x) const;
  double HIntegralInverse(double x) const;

  int64_t n_;
  double exponent_;
  double h_integral_x1_;
  double h_integral_n_;
  double s_;
};

}  // namespace ferry

#endif  // FERRY_DATA_ZIPF_SAMPLER_H_

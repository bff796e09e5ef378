// The normal draws behind every initial parameter, in one place so that the
// MLP (model_spec.h) and models built from a ModelDef (model_params.h) give
// bit-identical numbers for the same draws.
#ifndef FERRY_MODEL_NORMAL_INIT_H_
#define FERRY_MODEL_NORMAL_INIT_H_

#include <cmath>
#include <cstdint>
#include <random>

namespace ferry {

// Fills out[0, n) with N(0, stddev^2) values: Box-Muller on raw 64-bit draws
// of `rng` (two values per pair of draws; an odd n drops the last sine), so
// the same numbers come out on every platform.
inline void FillNormal(std::mt19937_64& rng, double stddev, float* out,
                       int64_t n) {
  for (int64_t i = 0; i < n; i += 2) {
    const double u1 = (static_cast<double>(rng() >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    out[i] = static_cast<float>(stddev * r * std::cos(2 * M_PI * u2));
    if (i + 1 < n) {
      out[i + 1] = static_cast<float>(stddev * r * std::sin(2 * M_PI * u2));
    }
  }
}

}  // namespace ferry

#endif  // FERRY_MODEL_NORMAL_INIT_H_

// Deterministic test inputs: `n` floats uniform in [-1, 1) from `seed`.
#ifndef FERRY_TESTS_TESTING_RANDOM_VALUES_H_
#define FERRY_TESTS_TESTING_RANDOM_VALUES_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace ferry::testing {

inline std::vector<float> RandomValues(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_RANDOM_VALUES_H_

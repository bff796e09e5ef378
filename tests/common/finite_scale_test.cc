#include "common/finite_scale.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

std::vector<float> Ramp(int64_t n) {
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[i] = 0.25f * static_cast<float>(i - n / 2);
  return x;
}

TEST(ScaleIfFiniteTest, ScalesEveryElementOfAFiniteRange) {
  // Lengths around the chunk size: a tail, one chunk, several.
  for (int64_t n : {0, 1, 7, 2047, 2048, 2049, 10000}) {
    std::vector<float> x = Ramp(n);
    const std::vector<float> before = x;
    EXPECT_EQ(ScaleIfFinite(x.data(), n, 3.0f), -1) << n;
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(x[i], before[i] * 3.0f) << i;
  }
}

TEST(ScaleIfFiniteTest, NamesTheFirstNaNOrInfinityAndLeavesIt) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t at : {0, 5, 2047, 2048, 6000, 9999}) {
    for (float bad : {nan, inf, -inf}) {
      std::vector<float> x = Ramp(10000);
      x[at] = bad;
      x[9999 - (9999 - at) / 2] = nan;  // a later one is not the first
      if (at == 9999) x[9999] = bad;
      EXPECT_EQ(ScaleIfFinite(x.data(), 10000, 2.0f), at);
      EXPECT_FALSE(std::isfinite(x[at]));
      EXPECT_EQ(std::isnan(x[at]), std::isnan(bad));
    }
  }
}

TEST(ScaleIfFiniteTest, TheLargestFiniteFloatsAndSubnormalsAreFinite) {
  std::vector<float> x = {std::numeric_limits<float>::max(),
                          -std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::denorm_min(), -0.0f};
  EXPECT_EQ(ScaleIfFinite(x.data(), 4, 0.5f), -1);
  EXPECT_EQ(x[0], std::numeric_limits<float>::max() * 0.5f);
}

// Bit for bit the division (an async push's gradient over its samples),
// which a multiplication by the reciprocal is not for every value.
TEST(DivideIfFiniteTest, DividesAsTheDivisionRoundsAndStopsAtNaN) {
  for (int64_t n : {1, 2047, 2049, 10000}) {
    std::vector<float> x = Ramp(n);
    for (int64_t i = 0; i < n; ++i) x[i] += 0.1f * static_cast<float>(i % 7);
    const std::vector<float> before = x;
    EXPECT_EQ(DivideIfFinite(x.data(), n, 3.0f), -1) << n;
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(x[i], before[i] / 3.0f) << i;
  }
  // The NaN's block (2048-4095) and those after it are left as they were;
  // the blocks before it are divided.
  std::vector<float> x = Ramp(5000);
  x[3000] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> before = x;
  EXPECT_EQ(DivideIfFinite(x.data(), 5000, 3.0f), 3000);
  EXPECT_EQ(x[10], before[10] / 3.0f);
  EXPECT_EQ(x[2047], before[2047] / 3.0f);
  EXPECT_EQ(x[2048], before[2048]);
  EXPECT_EQ(x[2999], before[2999]);
  EXPECT_EQ(x[4999], before[4999]);
}

TEST(FirstNonFiniteTest, FindsTheFirstNanOrInfinityAndChangesNothing) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> ramp = Ramp(10000);
  EXPECT_EQ(FirstNonFinite(ramp.data(), 10000), -1);
  EXPECT_EQ(FirstNonFinite(ramp.data(), 0), -1);
  for (int64_t at : {0, 2047, 2048, 9999}) {
    for (float bad : {nan, inf, -inf}) {
      std::vector<float> x = ramp;
      x[at] = bad;
      if (at < 9999) x[9999] = nan;  // a later one is not the first
      EXPECT_EQ(FirstNonFinite(x.data(), 10000), at);
      EXPECT_EQ(x[at == 0 ? 1 : 0], ramp[at == 0 ? 1 : 0]);
    }
  }
  const std::vector<float> edges = {std::numeric_limits<float>::max(),
                                    std::numeric_limits<float>::denorm_min(),
                                    -0.0f};
  EXPECT_EQ(FirstNonFinite(edges.data(), 3), -1);
}

}  // namespace
}  // namespace ferry

#include "compute/ctr_math.h"

#include <cmath>

#include "gtest/gtest.h"

namespace ferry {
namespace {

// -y log s(x) - (1 - y) log(1 - s(x)) the naive way, in long double.
double NaiveBce(double x, double y) {
  const long double s = 1.0L / (1.0L + std::exp(-static_cast<long double>(x)));
  return static_cast<double>(-y * std::log(s) - (1 - y) * std::log(1 - s));
}

TEST(CtrMathTest, BceMatchesTheDefinitionWhereItIsFinite) {
  for (float x : {-20.0f, -3.0f, -0.5f, 0.0f, 0.25f, 2.0f, 15.0f}) {
    for (float y : {0.0f, 0.3f, 1.0f}) {
      EXPECT_NEAR(BceWithLogit(x, y), NaiveBce(x, y), 1e-9) << x << " " << y;
    }
    const double s = 1.0 / (1.0 + std::exp(-static_cast<double>(x)));
    EXPECT_NEAR(StableSigmoid(x), s, 1e-7) << x;
    EXPECT_NEAR(BceWithLogitGrad(x, 1.0f), s - 1.0, 1e-7) << x;
  }
  EXPECT_NEAR(BceWithLogit(0.0f, 1.0f), std::log(2.0), 1e-12);
}

TEST(CtrMathTest, BceIsStableForLargeLogits) {
  // A confident mistake costs |x|, a confident hit ~exp(-|x|) (never -inf or
  // NaN as log(sigmoid(x)) would give).
  EXPECT_DOUBLE_EQ(BceWithLogit(100.0f, 0.0f), 100.0);
  EXPECT_DOUBLE_EQ(BceWithLogit(-100.0f, 1.0f), 100.0);
  EXPECT_DOUBLE_EQ(BceWithLogit(3e38f, 0.0f), static_cast<double>(3e38f));
  const double hit = BceWithLogit(100.0f, 1.0f);
  EXPECT_GT(hit, 0.0);
  EXPECT_NEAR(hit, std::exp(-100.0), 1e-50);
  EXPECT_EQ(BceWithLogit(-3e38f, 0.0f), 0.0);
  EXPECT_EQ(StableSigmoid(-1e4f), 0.0f);
  EXPECT_EQ(StableSigmoid(1e4f), 1.0f);
  EXPECT_EQ(BceWithLogitGrad(1e4f, 0.0f), 1.0f);
  EXPECT_EQ(BceWithLogitGrad(-1e4f, 1.0f), -1.0f);
  EXPECT_EQ(BceWithLogitGrad(-1e4f, 0.0f), 0.0f);
  EXPECT_GT(StableSigmoid(-80.0f), 0.0f);  // exp(-80) is a normal float
}

TEST(CtrMathTest, InteractionPairsInRowOrder) {
  EXPECT_EQ(DotInteractionPairs(1), 0);
  EXPECT_EQ(DotInteractionPairs(2), 1);
  EXPECT_EQ(DotInteractionPairs(27), 351);
  int64_t next = 0;
  for (int64_t i = 1; i < 30; ++i) {
    for (int64_t j = 0; j < i; ++j) {
      EXPECT_EQ(DotInteractionIndex(i, j), next++) << i << " " << j;
    }
  }
  EXPECT_EQ(next, DotInteractionPairs(30));
}

}  // namespace
}  // namespace ferry

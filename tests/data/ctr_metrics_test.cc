// AUC with ties and log loss, against values worked by hand.
#include "data/ctr_metrics.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

TEST(CtrMetricsTest, AucCountsPairsAndHalfTies) {
  // Perfect, reversed, and a hand-counted mix.
  EXPECT_DOUBLE_EQ(*BinaryAuc({0.1f, 0.2f, 0.8f, 0.9f}, {0, 0, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(*BinaryAuc({0.9f, 0.8f, 0.2f, 0.1f}, {0, 0, 1, 1}), 0.0);
  // Positives at 0.3 and 0.7; negatives at 0.5 and 0.1: pairs (0.3 > 0.1),
  // (0.7 > 0.5), (0.7 > 0.1) win, (0.3 < 0.5) loses: 3/4.
  EXPECT_DOUBLE_EQ(*BinaryAuc({0.3f, 0.5f, 0.7f, 0.1f}, {1, 0, 1, 0}), 0.75);
  // All tied: one half.
  EXPECT_DOUBLE_EQ(*BinaryAuc({0.5f, 0.5f, 0.5f}, {1, 0, 0}), 0.5);
  // A tie between a positive and one of two negatives: (1 + 0.5) / 2.
  EXPECT_DOUBLE_EQ(*BinaryAuc({0.4f, 0.4f, 0.2f}, {1, 0, 0}), 0.75);
}

TEST(CtrMetricsTest, BadInputsAreErrors) {
  EXPECT_EQ(BinaryAuc({0.1f}, {1}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(BinaryAuc({0.1f, 0.2f}, {1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BinaryAuc({0.1f, 0.2f}, {1, 2}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BinaryAuc({NAN, 0.2f}, {1, 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LogLoss({}, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LogLoss({1.5f}, {1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CtrMetricsTest, LogLossIsTheMeanNegativeLogLikelihood) {
  const double expected = -(std::log(0.8) + std::log(1 - 0.3)) / 2;
  EXPECT_NEAR(*LogLoss({0.8f, 0.3f}, {1, 0}), expected, 1e-6);
  // Clipped, not infinite.
  EXPECT_NEAR(*LogLoss({0.0f}, {1}), -std::log(1e-7), 1e-6);
}

}  // namespace
}  // namespace ferry

#include "ps/open_step_sum.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;

// One owned chunk of 2 elements: the slice [4, 6).
OpenStepSum TestSum(bool enabled = true) {
  return OpenStepSum(enabled, 1, {{0, 0, 4, 4, 2, 1}}, 4, 2);
}

TEST(OpenStepSumTest, DisabledHoldsNoSumAndSumsExactlyAnySet) {
  OpenStepSum sum = TestSum(/*enabled=*/false);
  EXPECT_FALSE(sum.enabled());
  EXPECT_TRUE(sum.SummedExactly({{"w0", 1}}));
  sum.RollBack(1, 3);  // only the epoch
}

TEST(OpenStepSumTest, AddsChunksOfTheOpenStepAndEpoch) {
  OpenStepSum sum = TestSum();
  const std::vector<float> a = {1, 2}, b = {10, 20};
  ASSERT_TRUE(sum.Add("w0", 0, 1, 0, 0, a).ok());
  EXPECT_TRUE(sum.SummedExactly({{"w0", 1}}));
  EXPECT_FALSE(sum.SummedExactly({{"w0", 1}, {"w1", 1}}));
  // Another step, or a push begun before a rollback: ABORTED.
  EXPECT_EQ(sum.Add("w1", 1, 1, 0, 0, b).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(sum.Add("w1", 0, 1, 7, 0, b).code(), absl::StatusCode::kAborted);
  ASSERT_TRUE(sum.Add("w1", 0, 1, 0, 0, b).ok());
  EXPECT_TRUE(sum.SummedExactly({{"w1", 1}, {"w0", 1}}));
}

TEST(OpenStepSumTest, ApplyExactlyRunsOnlyOverExactlyTheSet) {
  OpenStepSum sum = TestSum();
  const std::vector<float> a = {1, 2}, b = {10, 20};
  ASSERT_TRUE(sum.Add("w0", 0, 1, 0, 0, a).ok());
  ASSERT_TRUE(sum.Add("w1", 0, 1, 0, 0, b).ok());
  bool called = false;
  absl::Status refused =
      sum.ApplyExactly("step 0", {{"w0", 1}}, [&](ArrivalSum&) {
        called = true;
        return absl::OkStatus();
      });
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(called);
  std::vector<float> applied;
  ASSERT_TRUE(sum.ApplyExactly("step 0", {{"w0", 1}, {"w1", 1}},
                               [&](ArrivalSum& s) {
                                 applied = s.sum();
                                 s.Reset(1);
                                 return absl::OkStatus();
                               })
                  .ok());
  EXPECT_THAT(applied, ElementsAre(11.0f, 22.0f));
  EXPECT_TRUE(sum.Add("w0", 1, 1, 0, 0, a).ok());  // the next step
}

TEST(OpenStepSumTest, RollBackForgetsTheSumAndOlderEpochs) {
  OpenStepSum sum = TestSum();
  const std::vector<float> a = {1, 2};
  ASSERT_TRUE(sum.Add("w0", 0, 1, 0, 0, a).ok());
  sum.RollBack(1, 0);
  EXPECT_FALSE(sum.SummedExactly({{"w0", 1}}));
  EXPECT_EQ(sum.Add("w0", 0, 1, 0, 0, a).code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(sum.Add("w0", 0, 1, 1, 0, a).ok());
  EXPECT_TRUE(sum.SummedExactly({{"w0", 1}}));
}

}  // namespace
}  // namespace ferry

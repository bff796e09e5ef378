#include "common/throughput_window.h"

#include <algorithm>
#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

absl::Time At(double seconds) {
  return absl::UnixEpoch() + absl::Seconds(1000) + absl::Seconds(seconds);
}

TimedStep Step(double ended, int64_t samples) {
  return {.ended = At(ended),
          .began = std::nullopt,
          .samples = samples,
          .reports = 2,
          .compute_seconds = 0.01,
          .comm_seconds = 0.02};
}

TEST(ThroughputWindowTest, EmptyUntilTwoStepsEnded) {
  ThroughputWindow w;
  EXPECT_FALSE(w.first_end().has_value());
  EXPECT_EQ(w.figures().samples_per_second(), 0.0);
  w.Add(Step(1.0, 64));
  EXPECT_EQ(w.first_end(), At(1.0));
  EXPECT_EQ(w.figures().steps, 0);
  EXPECT_EQ(w.figures().samples_per_second(), 0.0);
  EXPECT_EQ(w.figures().step_seconds(), 0.0);
}

// The first step's samples lie before the window: 10 steps of 64 samples
// ending every 25 ms are 9 steps and 576 samples over 0.225 s.
TEST(ThroughputWindowTest, TheFirstStepOpensTheWindowAndIsNotCounted) {
  ThroughputWindow w;
  for (int k = 0; k < 10; ++k) w.Add(Step(2.0 + 0.025 * k, 64));
  const WindowFigures f = w.figures();
  EXPECT_EQ(f.steps, 9);
  EXPECT_EQ(f.samples, 576);
  EXPECT_EQ(f.reports, 18);
  EXPECT_NEAR(f.seconds, 0.225, 1e-9);
  EXPECT_NEAR(f.samples_per_second(), 576 / 0.225, 1e-6);
  EXPECT_NEAR(f.step_seconds(), 0.025, 1e-12);
  EXPECT_NEAR(f.compute_seconds, 0.09, 1e-12);
  EXPECT_NEAR(f.comm_seconds, 0.18, 1e-12);
  EXPECT_EQ(w.first_end(), At(2.0));
}

// Reports arriving late or in batches: the same set of steps in any order
// gives the same figures, ties included.
TEST(ThroughputWindowTest, TheOrderOfTheCallsChangesNothing) {
  std::vector<TimedStep> steps;
  for (int k = 0; k < 6; ++k) steps.push_back(Step(1.0 + 0.1 * k, 10 + k));
  steps.push_back(Step(1.0, 99));  // ends with the first
  std::vector<int> order = {0, 1, 2, 3, 4, 5, 6};
  ThroughputWindow reference;
  for (int i : order) reference.Add(steps[i]);
  const WindowFigures want = reference.figures();
  int permutations = 0;
  do {
    ThroughputWindow w;
    for (int i : order) w.Add(steps[i]);
    const WindowFigures got = w.figures();
    ASSERT_EQ(got.samples, want.samples);
    ASSERT_EQ(got.steps, want.steps);
    ASSERT_DOUBLE_EQ(got.seconds, want.seconds);
    ASSERT_DOUBLE_EQ(got.compute_seconds, want.compute_seconds);
    ++permutations;
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(permutations, 5040);
  EXPECT_EQ(want.samples, 11 + 12 + 13 + 14 + 15 + 99);
  EXPECT_NEAR(want.seconds, 0.5, 1e-9);
}

// The work of the steps inside lies between the earliest beginning of any
// step and the last end: a late starter's first step began before the
// window opened.
TEST(ThroughputWindowTest, TheWorkSpanReachesBackToTheEarliestBeginning) {
  ThroughputWindow w;
  TimedStep first = Step(1.0, 8);
  first.began = At(0.7);
  w.Add(first);
  TimedStep late = Step(1.5, 8);
  late.began = At(0.2);  // a worker that started early, ended late
  w.Add(late);
  w.Add(Step(2.0, 8));  // began unknown: its end
  EXPECT_NEAR(w.figures().seconds, 1.0, 1e-9);
  EXPECT_NEAR(w.figures().work_seconds, 1.8, 1e-9);
  TimedStep odd = Step(2.5, 8);
  odd.began = At(3.0);  // after its end: taken as its end
  w.Add(odd);
  EXPECT_NEAR(w.figures().work_seconds, 2.3, 1e-9);
}

TEST(ThroughputWindowTest, ADiscountNeverGoesBelowZero) {
  ThroughputWindow w;
  w.Add(Step(0, 5));
  w.Add(Step(1, 7));
  w.Discount(3);
  EXPECT_EQ(w.figures().samples, 4);
  w.Discount(100);
  EXPECT_EQ(w.figures().samples, 0);
}

TEST(ThroughputWindowTest, AWindowRestoredFromItsStateGoesOn) {
  ThroughputWindow w;
  w.Add(Step(0, 5));
  w.Add(Step(1, 7));
  ThroughputWindow restored(w.state());
  restored.Add(Step(2, 9));
  EXPECT_EQ(restored.figures().samples, 16);
  EXPECT_NEAR(restored.figures().seconds, 2.0, 1e-12);
  EXPECT_NEAR(restored.figures().work_seconds, 2.0, 1e-12);
}

}  // namespace
}  // namespace ferry

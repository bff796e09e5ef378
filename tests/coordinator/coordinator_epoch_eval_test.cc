// Epoch-end evaluations report that epoch's own weights: no step of the next
// epoch forms until they are fetched, and the last epoch's evaluation (the
// job's final one) names its epoch.
#include <thread>

#include "absl/synchronization/notification.h"
#include "coordinator/coordinator.h"
#include "coordinator/shard_control.h"
#include "gtest/gtest.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace ferry {
namespace {

// Blocks the fetch of `gated_version`'s weights until released.
class GatedEvaluator final : public WeightsEvaluator {
 public:
  explicit GatedEvaluator(int64_t gated_version) : gated_(gated_version) {}
  absl::StatusOr<TestScores> Evaluate(int64_t min_version) override {
    if (min_version == gated_) {
      entered.Notify();
      release.WaitForNotification();
    }
    return TestScores{.accuracy = 0.5, .loss = 1.0};
  }
  absl::Notification entered, release;

 private:
  const int64_t gated_;
};

TEST(CoordinatorEpochEvalTest, NextEpochWaitsForTheEpochsWeights) {
  // Ring, 1 worker, batch 4, 8 samples: steps 0-1 are epoch 0 (it ends at
  // version 2), steps 2-3 epoch 1.
  GatedEvaluator evaluator(/*gated_version=*/2);
  CoordinatorOptions options;
  options.job = Job(4, 2);
  options.job.set_mode(v1::MODE_RING);
  options.epoch_size = 8;
  options.long_poll = absl::Milliseconds(50);
  FakeClock clock;
  options.clock = &clock;
  auto c = Coordinator::Create(options, &evaluator);
  ASSERT_TRUE(c.ok()) << c.status();
  const Polled polled(**c, &clock, options.long_poll);
  const std::string w = (*c)->Register(v1::RegisterRequest())->worker_id();
  auto lease = NextWork(polled, w);
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_EQ(lease->action(), v1::NextTaskResponse::TRAIN);
  v1::StepReport done = Done(*lease);
  lease = NextWork(polled, w, &done);
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_EQ(lease->action(), v1::NextTaskResponse::TRAIN);
  EXPECT_EQ(lease->step(), 1);
  done = Done(*lease);
  // Epoch 0 is complete with step 1; while its weights are being fetched,
  // every long poll ends in WAIT (one call each: Next, not NextWork).
  lease = Next(polled, w, &done);
  evaluator.entered.WaitForNotification();
  for (int poll = 0; poll < 3; ++poll) {
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_EQ(lease->action(), v1::NextTaskResponse::WAIT) << poll;
    lease = Next(polled, w);
  }
  evaluator.release.Notify();
  lease = NextWork(polled, w);
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_EQ(lease->action(), v1::NextTaskResponse::TRAIN);
  EXPECT_EQ(lease->step(), 2);
  for (int step = 2; step < 4; ++step) {
    ASSERT_TRUE(lease.ok()) << lease.status();
    ASSERT_EQ(lease->action(), v1::NextTaskResponse::TRAIN);
    done = Done(*lease);
    lease = NextWork(polled, w, &done);
  }
  ASSERT_TRUE((*c)->WaitUntilFinished(absl::Seconds(5)));
  const v1::StatusResponse s = (*c)->Status();
  ASSERT_EQ(s.evals_size(), 2);
  EXPECT_EQ(s.evals(0).epoch(), 0);
  EXPECT_EQ(s.evals(0).step(), 2);
  EXPECT_FALSE(s.evals(0).final());
  // The last epoch's line: the final evaluation names epoch 1.
  EXPECT_EQ(s.evals(1).epoch(), 1);
  EXPECT_EQ(s.evals(1).step(), 4);
  EXPECT_TRUE(s.evals(1).final());
}

}  // namespace
}  // namespace ferry

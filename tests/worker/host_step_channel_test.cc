// HostStepChannel: a host thread and a loop thread through whole steps, the
// ends from either side, and the calls out of order.
#include "worker/host_step_channel.h"

#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

// The loop's side of one step: waits for the host, offers `lease`, takes
// the host's events up to its Finish and answers `applied`.
std::vector<HostEvent> LoopStep(HostStepChannel& channel, HostLease lease,
                                bool applied, int64_t* train_samples) {
  absl::StatusOr<int64_t> asked = channel.WaitForHost();
  EXPECT_TRUE(asked.ok()) << asked.status();
  *train_samples = asked.value_or(-1);
  channel.Offer(std::move(lease));
  std::vector<HostEvent> events;
  while (true) {
    absl::StatusOr<HostEvent> event = channel.TakeEvent();
    EXPECT_TRUE(event.ok()) << event.status();
    if (!event.ok()) break;
    events.push_back(*event);
    if (event->kind == HostEvent::Kind::kFinish) break;
  }
  channel.Complete(applied);
  return events;
}

TEST(HostStepChannelTest, StepsPassBetweenHostAndLoop) {
  HostStepChannel channel;
  std::vector<HostEvent> first, second;
  int64_t samples_first = 0, samples_second = 0;
  std::thread loop([&] {
    first = LoopStep(channel, {.step = 4, .epoch = 1, .samples = {7, 3}},
                     /*applied=*/true, &samples_first);
    second = LoopStep(channel, {.step = 5, .epoch = 1, .samples = {1}},
                      /*applied=*/false, &samples_second);
    channel.End(absl::OkStatus());
  });
  absl::StatusOr<std::optional<HostLease>> lease = channel.NextLease(10);
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(lease->has_value());
  EXPECT_EQ((*lease)->step, 4);
  EXPECT_EQ((*lease)->epoch, 1);
  EXPECT_EQ((*lease)->samples, (std::vector<int64_t>{7, 3}));
  ASSERT_TRUE(channel.Ready(8, 2).ok());
  ASSERT_TRUE(channel.Ready(0, 8).ok());
  absl::StatusOr<bool> applied = channel.Finish(1.5, 2);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_TRUE(*applied);

  lease = channel.NextLease(12);
  ASSERT_TRUE(lease.ok() && lease->has_value());
  EXPECT_EQ((*lease)->step, 5);
  ASSERT_TRUE(channel.Ready(0, 10).ok());
  applied = channel.Finish(0.5, 0);
  ASSERT_TRUE(applied.ok());
  EXPECT_FALSE(*applied);  // the loop gave the step up

  lease = channel.NextLease(12);  // the worker finished
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_FALSE(lease->has_value());
  loop.join();

  EXPECT_EQ(samples_first, 10);
  EXPECT_EQ(samples_second, 12);
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[0].kind, HostEvent::Kind::kReady);
  EXPECT_EQ(first[0].offset, 8);
  EXPECT_EQ(first[0].length, 2);
  EXPECT_EQ(first[1].offset, 0);
  EXPECT_EQ(first[1].length, 8);
  EXPECT_EQ(first[2].kind, HostEvent::Kind::kFinish);
  EXPECT_DOUBLE_EQ(first[2].loss_sum, 1.5);
  EXPECT_EQ(first[2].correct, 2);
  ASSERT_EQ(second.size(), 2u);
}

TEST(HostStepChannelTest, AHostWaitingWithATimeoutKeepsAsking) {
  HostStepChannel channel;
  absl::StatusOr<std::optional<HostLease>> lease =
      channel.NextLease(4, absl::ZeroDuration());
  EXPECT_TRUE(absl::IsDeadlineExceeded(lease.status())) << lease.status();
  // The host still counts as asking: the loop offers, the next call takes.
  std::thread loop([&] {
    ASSERT_TRUE(channel.WaitForHost().ok());
    channel.Offer({.step = 2, .samples = {1}});
  });
  loop.join();
  lease = channel.NextLease(4, absl::ZeroDuration());
  ASSERT_TRUE(lease.ok() && lease->has_value()) << lease.status();
  EXPECT_EQ((*lease)->step, 2);
}

TEST(HostStepChannelTest, CloseEndsTheLoopsWaits) {
  HostStepChannel channel;
  absl::Status waited;
  std::thread loop([&] { waited = channel.WaitForHost().status(); });
  channel.Close();
  loop.join();
  EXPECT_TRUE(absl::IsCancelled(waited)) << waited;
  EXPECT_TRUE(absl::IsCancelled(channel.TakeEvent().status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(channel.NextLease(1).status()));
}

TEST(HostStepChannelTest, CloseMidStepEndsTakeEvent) {
  HostStepChannel channel;
  absl::Status taken;
  std::thread loop([&] {
    ASSERT_TRUE(channel.WaitForHost().ok());
    channel.Offer({.step = 1, .samples = {0}});
    taken = channel.TakeEvent().status();
  });
  ASSERT_TRUE(channel.NextLease(1).ok());
  channel.Close();
  loop.join();
  EXPECT_TRUE(absl::IsCancelled(taken)) << taken;
}

TEST(HostStepChannelTest, TheWorkersErrorReachesTheHost) {
  HostStepChannel channel;
  std::thread loop([&] {
    ASSERT_TRUE(channel.WaitForHost().ok());
    channel.Offer({.step = 1, .samples = {0}});
    ASSERT_TRUE(channel.TakeEvent().ok());  // the finish
    channel.End(absl::NotFoundError("evicted"));
  });
  ASSERT_TRUE(channel.NextLease(1).ok());
  absl::StatusOr<bool> applied = channel.Finish(0, 0);
  loop.join();
  EXPECT_TRUE(absl::IsNotFound(applied.status())) << applied.status();
  EXPECT_TRUE(absl::IsNotFound(channel.NextLease(1).status()));
}

TEST(HostStepChannelTest, CallsOutOfOrderAreRefused) {
  HostStepChannel channel;
  EXPECT_TRUE(absl::IsInvalidArgument(channel.NextLease(0).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(channel.Ready(0, 1)));
  EXPECT_TRUE(absl::IsFailedPrecondition(channel.Finish(0, 0).status()));
  std::thread loop([&] {
    ASSERT_TRUE(channel.WaitForHost().ok());
    channel.Offer({.step = 1, .samples = {0}});
  });
  ASSERT_TRUE(channel.NextLease(1).ok());
  loop.join();
  // A step is open: no second lease before Finish.
  EXPECT_TRUE(absl::IsFailedPrecondition(channel.NextLease(1).status()));
}

TEST(HostStepChannelTest, AnEvaluationOpensNoStepAndItsResultReachesTheLoop) {
  HostStepChannel channel;
  EXPECT_FALSE(channel.evaluates());
  channel.SetEvaluates(true);
  EXPECT_TRUE(channel.evaluates());
  absl::StatusOr<HostEvaluation> got;
  std::thread loop([&] {
    ASSERT_TRUE(channel.WaitForHost().ok());
    channel.Offer(
        {.step = 8,
         .epoch = 1,
         .evaluate = HostEvalTask{.version = 8, .epoch = 1, .final = true}});
    got = channel.AwaitEvaluation();
    channel.End(absl::OkStatus());
  });
  absl::StatusOr<std::optional<HostLease>> lease = channel.NextLease(10);
  ASSERT_TRUE(lease.ok() && lease->has_value()) << lease.status();
  ASSERT_TRUE((*lease)->evaluate.has_value());
  EXPECT_TRUE((*lease)->samples.empty());
  EXPECT_EQ((*lease)->evaluate->version, 8);
  EXPECT_TRUE((*lease)->evaluate->final);
  // No step is open: gradients and step() are refused.
  EXPECT_TRUE(absl::IsFailedPrecondition(channel.Ready(0, 1)));
  EXPECT_TRUE(absl::IsFailedPrecondition(channel.Finish(0, 0).status()));
  ASSERT_TRUE(channel
                  .ReportEvaluation({.task = *(*lease)->evaluate,
                                     .accuracy = 0.5,
                                     .loss = 1.25,
                                     .duration_seconds = 0.5})
                  .ok());
  lease = channel.NextLease(10);  // the loop ended: no more leases
  loop.join();
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_FALSE(lease->has_value());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->task.version, 8);
  EXPECT_DOUBLE_EQ(got->accuracy, 0.5);
  EXPECT_DOUBLE_EQ(got->loss, 1.25);
}

TEST(HostStepChannelTest, AHostThatAsksOnWithoutEvaluatingEndsTheWait) {
  HostStepChannel channel;
  absl::StatusOr<HostEvaluation> got;
  std::thread loop([&] {
    ASSERT_TRUE(channel.WaitForHost().ok());
    channel.Offer({.step = 3, .evaluate = HostEvalTask{.version = 3}});
    got = channel.AwaitEvaluation();
    channel.End(absl::OkStatus());
  });
  absl::StatusOr<std::optional<HostLease>> lease = channel.NextLease(10);
  ASSERT_TRUE(lease.ok() && lease->has_value()) << lease.status();
  lease = channel.NextLease(10);  // asks on, no result
  loop.join();
  EXPECT_TRUE(absl::IsFailedPrecondition(got.status())) << got.status();
}

}  // namespace
}  // namespace ferry

// Shard checkpoints in a sync PS job: a failed checkpoint is a job event,
// and shards that cannot apply a step as the coordinator decided it are
// restored to the newest checkpoint, the steps after it re-run exactly once.
#include <functional>
#include <string>
#include <vector>

#include "coordinator/coordinator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

// Drives one worker through `steps` sync steps (reports each, asks again).
absl::StatusOr<v1::NextTaskResponse> RunSteps(Fixture& f, const std::string& w,
                                              v1::NextTaskResponse lease,
                                              int steps) {
  for (int i = 0; i < steps; ++i) {
    const v1::StepReport done = Done(lease);
    auto next = NextWork(f, w, &done);
    if (!next.ok()) return next.status();
    lease = *next;
  }
  return lease;
}

// A checkpoint the shards cannot write (a full or read-only disk) is a job
// event, seen at once in the status, and training goes on.
TEST(CoordinatorShardRollbackTest, AFailedCheckpointIsAJobEvent) {
  Fixture f(Job(4, 1), 40, 1, "", /*checkpoint_every=*/2);
  {
    absl::MutexLock lock(&f.shards.mu);
    f.shards.versions = {0, 0};
    f.shards.checkpoint_error =
        absl::ResourceExhaustedError("No space left on device");
  }
  const std::string w = f.Join();
  auto lease = Next(f, w);
  ASSERT_TRUE(lease.ok());
  lease = RunSteps(f, w, *lease, 3);  // steps 0..2 applied
  ASSERT_TRUE(lease.ok()) << lease.status();
  WaitForFinalize(f.shards, 3);
  const v1::StatusResponse s = f.coordinator->Status();
  bool seen = false;
  for (const v1::JobEvent& e : s.events()) {
    if (e.kind() != "checkpoint_failed") continue;
    seen = true;
    EXPECT_EQ(e.step(), 2);
    EXPECT_THAT(e.detail(), HasSubstr("No space left on device"));
  }
  EXPECT_TRUE(seen);
  absl::MutexLock lock(&f.shards.mu);
  EXPECT_TRUE(f.shards.checkpoints.empty());
}

// Applies steps 0..4 (checkpoints at 2 and 4), lets `break_shards` put the
// fake shards in a state where step 5 cannot be finalized as decided, and
// checks that the coordinator restores every shard to the checkpoint at 4,
// re-runs step 4 on the samples it had and still applies every sample of
// the epoch exactly once.
void ExpectRollbackToTheCheckpointAt4(
    const std::function<void(FakeShardControl&)>& break_shards) {
  Fixture f(Job(4, 1), 40, 1, "", /*checkpoint_every=*/2);
  {
    absl::MutexLock lock(&f.shards.mu);
    f.shards.versions = {0, 0};
  }
  const std::string w = f.Join();
  auto lease = Next(f, w);
  ASSERT_TRUE(lease.ok());
  lease = RunSteps(f, w, *lease, 5);  // steps 0..4 applied
  ASSERT_TRUE(lease.ok());
  WaitForFinalize(f.shards, 5);
  ASSERT_EQ(lease->step(), 5);
  {
    absl::MutexLock lock(&f.shards.mu);
    EXPECT_EQ(f.shards.checkpoints, (std::vector<int64_t>{2, 4}));
    break_shards(f.shards);
  }
  const v1::StepReport done = Done(*lease);
  auto after = NextWork(f, w, &done);
  // The step in hand is void once the shards are restored.
  ASSERT_TRUE(WaitForShards(
      f.shards, [](FakeShardControl& s) { return !s.restores.empty(); }));
  for (int i = 0; i < 100 && after.ok() && after->step() != 4; ++i) {
    after = NextWork(f, w);
  }
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->step(), 4);             // step 4 runs again...
  EXPECT_EQ(after->tasks(0).begin(), 16);  // ...on the samples it had
  {
    absl::MutexLock lock(&f.shards.mu);
    EXPECT_EQ(f.shards.restores, (std::vector<int64_t>{4}));
  }
  v1::StatusResponse s = f.coordinator->Status();
  EXPECT_EQ(s.rollbacks(), 1);
  EXPECT_EQ(s.samples_applied(), 16);
  EXPECT_TRUE(HasEvent(s, "shards_rolled_back"));
  // The epoch still applies every sample exactly once.
  auto end = RunSteps(f, w, *after, 6);
  ASSERT_TRUE(end.ok());
  ASSERT_TRUE(f.coordinator->WaitUntilFinished(absl::Seconds(5)));
  s = f.coordinator->Status();
  ASSERT_EQ(s.accounting_size(), 1);
  EXPECT_EQ(s.accounting(0).samples_applied(), 40);
  EXPECT_EQ(s.accounting(0).samples_dropped(), 0);
  EXPECT_EQ(s.samples_applied(), 40);
}

TEST(CoordinatorShardRollbackTest,
     ShardLosingAStepRollsBackToACheckpointAndRequeuesTheSamples) {
  ExpectRollbackToTheCheckpointAt4([](FakeShardControl& shards) {
    // Shard 1 restarts from its checkpoint at version 4 and lost step 5.
    shards.versions = {5, 4};
    shards.lose_next = 1;
  });
}

// The shards finalized step 5 on push over a contributor set the
// coordinator did not decide (a worker it dropped had pushed everywhere):
// every shard is at version 6 with an update the job did not decide, so
// the coordinator must not take it as applied (it did without the
// ALREADY_EXISTS path: no restore).
TEST(CoordinatorShardRollbackTest,
     StepAppliedOnPushOverAnotherSetIsUndoneAndItsSamplesRequeued) {
  ExpectRollbackToTheCheckpointAt4(
      [](FakeShardControl& shards) { shards.applied_other_next = 1; });
}

TEST(CoordinatorShardRollbackTest,
     RestartResumesAndSettlesTheStepInDoubtFromTheShards) {
  Fixture f(Job(4, 2), 16, 1, "state");
  {
    absl::MutexLock lock(&f.shards.mu);
    f.shards.versions = {0};
  }
  const std::string w = f.Join();
  auto lease = Next(f, w);
  ASSERT_TRUE(lease.ok());
  lease = RunSteps(f, w, *lease, 2);
  WaitForFinalize(f.shards, 2);
  ASSERT_TRUE(lease.ok());
  ASSERT_EQ(lease->step(), 2);
  {
    absl::MutexLock lock(&f.shards.mu);
    f.shards.fail_next = 1000000;  // step 2 stays in doubt
  }
  v1::NextTaskRequest report;
  report.set_worker_id(w);
  *report.mutable_done() = Done(*lease);
  report.set_report_only(true);
  ASSERT_TRUE(Call(f, report).ok());
  // The finalizer saved step 2 as in doubt before it tried the shards.
  ASSERT_TRUE(WaitForShards(f.shards, [](FakeShardControl& s) {
    return std::count(s.attempted.begin(), s.attempted.end(), 2) > 0;
  }));
  f.coordinator->Shutdown();
  f.coordinator.reset();
  {
    // ...but the shards had applied it before the coordinator died.
    absl::MutexLock lock(&f.shards.mu);
    f.shards.fail_next = 0;
    f.shards.versions = {3};
  }
  auto restarted = f.Restart();
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  f.coordinator = std::move(*restarted);
  auto next = NextWork(f, w);  // the worker is still a member
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->step(), 3);
  EXPECT_EQ(next->tasks(0).begin(), 12);
  v1::StatusResponse s = f.coordinator->Status();
  EXPECT_EQ(s.restarts(), 1);
  EXPECT_EQ(s.samples_applied(), 12);
  EXPECT_TRUE(HasEvent(s, "coordinator_restarted"));
  EXPECT_TRUE(HasEvent(s, "step_recovered"));
  auto end = RunSteps(f, w, *next, 5);
  ASSERT_TRUE(end.ok());
  ASSERT_TRUE(f.coordinator->WaitUntilFinished(absl::Seconds(5)));
  s = f.coordinator->Status();
  ASSERT_EQ(s.accounting_size(), 2);
  EXPECT_EQ(s.accounting(0).samples_applied(), 16);
  EXPECT_EQ(s.accounting(1).samples_applied(), 16);
}

// Shards that resumed another run's checkpoint (ahead of every step this
// coordinator formed) would refuse every push as "already applied", the
// same step leased again forever. The coordinator stops the job instead,
// with the reason, and gives no more leases.
TEST(CoordinatorShardRollbackTest, ShardsAheadOfEveryFormedStepStopTheJob) {
  Fixture f(Job(4, 1), 40, 1, "", /*checkpoint_every=*/2);
  {
    absl::MutexLock lock(&f.shards.mu);
    f.shards.versions = {2100, 2100};
  }
  const std::string w = f.Join();
  auto lease = Next(f, w);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->step(), 0);
  // The finalizer looks at the shards once it has been idle for a second.
  ASSERT_TRUE(WaitForStatus(*f.coordinator, [](const v1::StatusResponse& s) {
    return !s.error().empty();
  }));
  const v1::StatusResponse s = f.coordinator->Status();
  EXPECT_THAT(s.error(), HasSubstr("shard 0 is at version 2100"));
  EXPECT_THAT(s.error(), HasSubstr("another run"));
  EXPECT_TRUE(HasEvent(s, "halted"));
  auto refused = NextWork(f, w);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("version 2100"));
  absl::MutexLock lock(&f.shards.mu);
  EXPECT_TRUE(f.shards.restores.empty());  // nothing was rolled back
}

}  // namespace
}  // namespace ferry

// An epoch starts only once its start is checkpointed (CheckpointPlan's owed
// checkpoint): while the shards cannot write it (a full or read-only disk)
// the next epoch waits and the write is retried; a shard that restarts
// meanwhile rolls the job back inside the epoch that is still open, so no
// sample is lost or applied twice.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace ferry {
namespace {

void FailCheckpoints(Fixture& f, bool fail) {
  absl::MutexLock lock(&f.shards.mu);
  f.shards.checkpoint_error =
      fail ? absl::ResourceExhaustedError("No space left on device")
           : absl::OkStatus();
}

// Waits until the shards were asked for at least `n` checkpoints.
bool CheckpointCallsReach(Fixture& f, int n) {
  return WaitForShards(
      f.shards, [n](FakeShardControl& s) { return s.checkpoint_calls >= n; });
}

// One worker reports leases until the job finishes (bounded).
void FinishAlone(Fixture& f, const std::string& w,
                 absl::StatusOr<v1::NextTaskResponse> lease) {
  for (int i = 0;
       i < 200 && lease.ok() && lease->action() == v1::NextTaskResponse::TRAIN;
       ++i) {
    const v1::StepReport done = Done(*lease);
    lease = NextWork(f, w, &done);
  }
  ASSERT_TRUE(f.coordinator->WaitUntilFinished(absl::Seconds(5)));
}

void ExpectEveryEpochExact(const v1::StatusResponse& s, int epochs,
                           int64_t samples) {
  ASSERT_EQ(s.accounting_size(), epochs);
  for (const v1::EpochAccounting& a : s.accounting()) {
    EXPECT_EQ(a.samples_applied(), samples) << "epoch " << a.epoch();
    EXPECT_EQ(a.samples_dropped(), 0) << "epoch " << a.epoch();
  }
}

TEST(CoordinatorOwedCheckpointTest, AnEpochStartsOnlyOnceItsStartIsSaved) {
  Fixture f(Job(4, 2), 8);  // two steps an epoch
  {
    absl::MutexLock lock(&f.shards.mu);
    f.shards.versions = {0, 0};
  }
  FailCheckpoints(f, true);
  const std::string w = f.Join();
  auto lease = Next(f, w);
  ASSERT_TRUE(lease.ok());
  v1::StepReport done = Done(*lease);
  lease = NextWork(f, w, &done);
  ASSERT_TRUE(lease.ok());
  ASSERT_EQ(lease->step(), 1);
  done = Done(*lease);
  auto waiting = Next(f, w, &done);  // epoch 0's last step
  ASSERT_TRUE(waiting.ok());
  // The write is retried; meanwhile epoch 1 hands out nothing.
  ASSERT_TRUE(CheckpointCallsReach(f, 3));
  EXPECT_NE(Next(f, w)->action(), v1::NextTaskResponse::TRAIN);
  v1::StatusResponse s = f.coordinator->Status();
  EXPECT_EQ(s.accounting_size(), 0);
  EXPECT_EQ(s.epoch(), 0);
  bool waits = false;
  for (const v1::JobEvent& e : s.events()) {
    if (e.kind() == "checkpoint_failed") {
      EXPECT_EQ(e.step(), 2);
      waits |= e.detail().find("the next epoch waits") != std::string::npos;
    }
  }
  EXPECT_TRUE(waits);
  // Past the wait limit (5 minutes of the coordinator's clock) the status
  // error says the job is stuck and why; the retries go on.
  EXPECT_EQ(s.error(), "");
  int calls = 0;
  {
    absl::MutexLock lock(&f.shards.mu);
    calls = f.shards.checkpoint_calls;
  }
  f.clock.Advance(f.options.checkpoint_wait_limit + absl::Seconds(1));
  ASSERT_TRUE(CheckpointCallsReach(f, calls + 1));
  ASSERT_TRUE(WaitForStatus(*f.coordinator, [](const v1::StatusResponse& st) {
    return st.error().find("has waited") != std::string::npos;
  }));
  EXPECT_NE(f.coordinator->Status().error().find("No space left on device"),
            std::string::npos);
  // Space again: the checkpoint is written, the error clears and epoch 1
  // starts.
  FailCheckpoints(f, false);
  ASSERT_TRUE(WaitForStatus(*f.coordinator, [](const v1::StatusResponse& st) {
    return st.accounting_size() == 1 && HasEvent(st, "checkpoint_retried");
  }));
  EXPECT_EQ(f.coordinator->Status().error(), "");
  {
    absl::MutexLock lock(&f.shards.mu);
    EXPECT_EQ(f.shards.checkpoints, (std::vector<int64_t>{2}));
  }
  lease = NextWork(f, w);
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(lease->step(), 2);
  FinishAlone(f, w, lease);
  s = f.coordinator->Status();
  ExpectEveryEpochExact(s, 2, 8);
  EXPECT_EQ(s.rollbacks(), 0);
}

TEST(CoordinatorOwedCheckpointTest,
     AShardRestartWhileTheStartIsOwedRollsBackInsideTheEpoch) {
  Fixture f(Job(4, 2), 16, 1, "", /*checkpoint_every=*/2);
  {
    absl::MutexLock lock(&f.shards.mu);
    f.shards.versions = {0, 0};
  }
  const std::string w = f.Join();
  auto lease = Next(f, w);
  ASSERT_TRUE(lease.ok());
  for (int i = 0; i < 3; ++i) {  // steps 0..2; a checkpoint at 2
    const v1::StepReport done = Done(*lease);
    lease = NextWork(f, w, &done);
    ASSERT_TRUE(lease.ok());
  }
  WaitForFinalize(f.shards, 3);
  ASSERT_EQ(lease->step(), 3);
  FailCheckpoints(f, true);
  const v1::StepReport done = Done(*lease);
  ASSERT_TRUE(Next(f, w, &done).ok());  // epoch 0 ends; its checkpoint fails
  ASSERT_TRUE(CheckpointCallsReach(f, 3));
  {
    // Every attempt asks the shards to keep the one version they share.
    absl::MutexLock lock(&f.shards.mu);
    EXPECT_EQ(f.shards.last_keep, (std::vector<int64_t>{2}));
  }
  {
    // Shard 1 restarts from its checkpoint at 2.
    absl::MutexLock lock(&f.shards.mu);
    f.shards.versions = {4, 2};
  }
  ASSERT_TRUE(WaitForShards(
      f.shards, [](FakeShardControl& s) { return !s.restores.empty(); }));
  FailCheckpoints(f, false);
  {
    absl::MutexLock lock(&f.shards.mu);
    EXPECT_EQ(f.shards.restores, (std::vector<int64_t>{2}));
  }
  // Steps 2 and 3 run again on their samples, then epoch 1.
  auto again = NextWork(f, w);
  for (int i = 0; i < 100 && again.ok() && again->step() != 2; ++i) {
    again = NextWork(f, w);
  }
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->step(), 2);
  EXPECT_EQ(again->tasks(0).begin(), 8);
  FinishAlone(f, w, again);
  const v1::StatusResponse s = f.coordinator->Status();
  ExpectEveryEpochExact(s, 2, 16);
  EXPECT_EQ(s.rollbacks(), 1);
  EXPECT_TRUE(s.error().empty()) << s.error();
}

// Async: the barrier at an epoch's end owes its cut the same way.
TEST(CoordinatorOwedCheckpointTest, AnAsyncEpochWaitsForItsEndCut) {
  Fixture f(Job(4, 2, v1::CONSISTENCY_ASYNC), 8);  // two tasks an epoch
  {
    absl::MutexLock lock(&f.shards.mu);
    f.shards.versions = {0, 0};
  }
  const std::string w = f.Join();
  for (int i = 0; i < 2; ++i) {
    auto lease = NextWork(f, w);
    ASSERT_TRUE(lease.ok()) << lease.status();
    ASSERT_EQ(lease->action(), v1::NextTaskResponse::TRAIN);
    if (i == 1) FailCheckpoints(f, true);
    {
      absl::MutexLock lock(&f.shards.mu);
      for (int64_t& v : f.shards.versions) ++v;  // the push, on arrival
    }
    v1::NextTaskRequest report;
    report.set_worker_id(w);
    *report.mutable_done() = Done(*lease);
    report.set_report_only(true);
    ASSERT_TRUE(Call(f, report).ok());
  }
  const int before = [&] {
    absl::MutexLock lock(&f.shards.mu);
    return f.shards.checkpoint_calls;
  }();
  ASSERT_TRUE(CheckpointCallsReach(f, before + 2));
  EXPECT_EQ(f.coordinator->Status().accounting_size(), 0);
  FailCheckpoints(f, false);
  ASSERT_TRUE(WaitForStatus(*f.coordinator, [](const v1::StatusResponse& st) {
    return st.accounting_size() == 1;
  }));
  {
    absl::MutexLock lock(&f.shards.mu);
    ASSERT_FALSE(f.shards.checkpoints.empty());
    EXPECT_EQ(f.shards.checkpoints.back(), 2);
  }
  EXPECT_TRUE(f.coordinator->Status().error().empty());
}

}  // namespace
}  // namespace ferry

// RecoveryLog on its own: which version the shards go back to, and which
// tasks come back to the queue, in which order.
#include "coordinator/recovery_log.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

v1::DataTask Task(int64_t id) {
  v1::DataTask t;
  t.set_task_id(id);
  t.set_begin(id * 4);
  t.set_end(id * 4 + 4);
  return t;
}

std::vector<int64_t> Ids(const std::vector<v1::DataTask>& tasks) {
  std::vector<int64_t> ids;
  for (const v1::DataTask& t : tasks) ids.push_back(t.task_id());
  return ids;
}

TEST(CoordinatorRecoveryLogTest, TargetIsTheLowestVersionWhenAllAgree) {
  RecoveryLog log;
  EXPECT_EQ(log.RestoreTarget(5, 5, 5), 5);  // nothing to undo
  // Never above the job, and only where a checkpoint is.
  EXPECT_EQ(log.RestoreTarget(7, 7, 5), 0);
  log.AddCheckpoint(5);
  EXPECT_EQ(log.RestoreTarget(7, 7, 5), 5);
}

TEST(CoordinatorRecoveryLogTest, TargetFallsBackToTheNewestCheckpointBelow) {
  RecoveryLog log;
  EXPECT_EQ(log.RestoreTarget(4, 5, 5), 0);  // no checkpoint at all
  log.AddCheckpoint(2);
  log.AddCheckpoint(4);
  EXPECT_EQ(log.RestoreTarget(4, 5, 5), 4);  // a checkpoint holds it
  EXPECT_EQ(log.RestoreTarget(3, 5, 5), 2);
  log.DropCheckpointsFrom(2);  // restoring to 2 failed
  EXPECT_EQ(log.RestoreTarget(3, 5, 5), 0);
  EXPECT_EQ(log.latest_checkpoint(), -1);
}

TEST(CoordinatorRecoveryLogTest, KeepsThreeCheckpointsAndStepsFromTheSecond) {
  RecoveryLog log;
  for (int64_t step = 0; step < 8; ++step) log.RecordApplied(step, Task(step));
  log.AddCheckpoint(2);
  EXPECT_EQ(log.first_step(-1), 2);
  log.AddCheckpoint(4);
  EXPECT_EQ(log.first_step(-1), 2);  // a shard may come back at 2
  log.AddCheckpoint(6);
  log.AddCheckpoint(7);
  EXPECT_EQ(log.checkpoints(), (std::vector<int64_t>{4, 6, 7}));
  EXPECT_EQ(log.first_step(-1), 6);
  EXPECT_TRUE(log.Covers(6));
  EXPECT_FALSE(log.Covers(5));
}

TEST(CoordinatorRecoveryLogTest, TakeFromReturnsNewestStepFirstAndForgetsIt) {
  RecoveryLog log;
  log.RecordApplied(3, Task(1));
  log.RecordApplied(3, Task(2));
  log.RecordApplied(4, Task(3));
  log.RecordApplied(4, Task(4));
  log.LogStep(5);  // applied with no task of this epoch
  log.RecordApplied(2, Task(0));
  EXPECT_EQ(Ids(log.TakeFrom(3)), (std::vector<int64_t>{4, 3, 2, 1}));
  EXPECT_TRUE(log.TakeFrom(3).empty());
  EXPECT_EQ(Ids(log.TakeFrom(0)), (std::vector<int64_t>{0}));
  EXPECT_FALSE(log.Covers(0));
}

TEST(CoordinatorRecoveryLogTest, SaveAndLoadRoundTrip) {
  RecoveryLog log;
  log.RecordApplied(4, Task(9));
  log.AddCheckpoint(4);
  log.Forget(7);
  v1::CoordinatorState state;
  log.SaveTo(state);
  RecoveryLog loaded;
  loaded.LoadFrom(state);
  EXPECT_EQ(loaded.checkpoints(), (std::vector<int64_t>{4}));
  EXPECT_EQ(Ids(loaded.TakeFrom(0)), (std::vector<int64_t>{9}));
}

}  // namespace
}  // namespace ferry

namespace ferry {
namespace {

TEST(CoordinatorRecoveryLogTest, HybridResumesOnlyWhereBothHalvesHoldIt) {
  RecoveryLog log;
  log.KeepStepsForRingCheckpoints();
  for (int64_t step = 0; step < 9; ++step) log.LogStep(step);
  log.AddCheckpoint(2);
  EXPECT_TRUE(log.Covers(0));  // no version both hold: from the start
  log.AddRingCheckpoint(2);
  EXPECT_FALSE(log.Covers(1));
  log.AddCheckpoint(4);  // the ring's part of 4 failed
  log.AddCheckpoint(6);
  log.AddRingCheckpoint(6);
  log.AddCheckpoint(7);  // a forced one of the shards
  // The shards keep their newest three (4, 6, 7): 2 is gone.
  EXPECT_EQ(log.CheckpointsOfBothHalves(), std::vector<int64_t>{6});
  // The steps from the newest version both hold are kept, though the
  // shards alone would need them only from 6 (their second newest).
  EXPECT_TRUE(log.Covers(6));
  log.AddCheckpoint(8);
  EXPECT_EQ(log.checkpoints(), (std::vector<int64_t>{6, 7, 8}));
  EXPECT_TRUE(log.Covers(6));
  log.DropRingCheckpointsFrom(6);
  EXPECT_EQ(log.CheckpointsOfBothHalves(), std::vector<int64_t>{});
  v1::CoordinatorState saved;
  log.AddRingCheckpoint(8);
  log.SaveTo(saved);
  RecoveryLog loaded;
  loaded.LoadFrom(saved);
  EXPECT_EQ(loaded.CheckpointsOfBothHalves(), std::vector<int64_t>{8});
}

TEST(AfterRestoreTest, RetriesTransientFailuresAndFallsBackOnBadCheckpoints) {
  using A = RestoreFailureAction;
  EXPECT_EQ(AfterRestore(absl::OkStatus(), 4), A::kDone);
  EXPECT_EQ(AfterRestore(absl::UnavailableError("down"), 4), A::kRetry);
  EXPECT_EQ(AfterRestore(absl::DeadlineExceededError("slow"), 0), A::kRetry);
  EXPECT_EQ(AfterRestore(absl::FailedPreconditionError("no file"), 4),
            A::kTryOlder);
  EXPECT_EQ(AfterRestore(absl::DataLossError("crc"), 4), A::kTryOlder);
  EXPECT_EQ(AfterRestore(absl::FailedPreconditionError("no file"), 0),
            A::kGiveUp);
  EXPECT_EQ(AfterRestore(absl::DataLossError("crc"), 0), A::kGiveUp);
}

}  // namespace
}  // namespace ferry

// The coordinator's saved state is replaced after every change and made
// durable (fsync) at most once per state_sync_interval of its clock, so a
// machine crash loses at most that much of it; a stop is synced at once,
// and an interval of zero syncs every save.
#include <memory>
#include <string>

#include "common/file_system.h"
#include "coordinator/coordinator.h"
#include "gtest/gtest.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace ferry {
namespace {

// One worker through `steps` sync steps from `lease`; the next lease.
v1::NextTaskResponse Steps(Fixture& f, const std::string& w,
                           v1::NextTaskResponse lease, int steps) {
  for (int i = 0; i < steps; ++i) {
    const v1::StepReport done = Done(lease);
    auto next = NextWork(f, w, &done);
    EXPECT_TRUE(next.ok()) << next.status();
    if (!next.ok()) break;
    lease = *next;
  }
  return lease;
}

// Waits until the coordinator has applied (and saved) `steps` steps.
void AwaitApplied(Fixture& f, int64_t steps) {
  WaitForFinalize(f.shards, static_cast<size_t>(steps));
  ASSERT_TRUE(WaitForStatus(
      *f.coordinator,
      [steps](const v1::StatusResponse& s) { return s.step() >= steps; }));
}

// The job's applied steps as a coordinator started on what a machine crash
// of `f`'s file system would leave sees them.
int64_t StepsAfterMachineCrash(Fixture& f) {
  const std::unique_ptr<InMemoryFileSystem> crashed = f.fs.AfterMachineCrash();
  CoordinatorOptions options = f.options;
  options.file_system = crashed.get();
  auto resumed = Coordinator::Create(options, &f.shards);
  EXPECT_TRUE(resumed.ok()) << resumed.status();
  if (!resumed.ok()) return -1;
  const int64_t steps = (*resumed)->Status().step();
  (*resumed)->Shutdown();
  return steps;
}

// A fixture whose coordinator syncs its state every `interval`.
std::unique_ptr<Fixture> JobSyncingEvery(absl::Duration interval) {
  auto f = std::make_unique<Fixture>(Job(4, 1), 40, 1, /*state_dir=*/"",
                                     /*checkpoint_every=*/0);
  f->coordinator.reset();  // a fresh job, persisted under the interval
  f->options.state_dir = "/state";
  f->options.state_sync_interval = interval;
  auto c = f->Restart();
  EXPECT_TRUE(c.ok()) << c.status();
  f->coordinator = *std::move(c);
  return f;
}

TEST(CoordinatorStateSyncTest, SavesAreSyncedOncePerIntervalOfTheClock) {
  std::unique_ptr<Fixture> f = JobSyncingEvery(absl::Minutes(10));
  const std::string w = f->Join();
  auto lease = Next(*f, w);
  ASSERT_TRUE(lease.ok()) << lease.status();
  v1::NextTaskResponse next = Steps(*f, w, *lease, 3);
  ASSERT_EQ(next.step(), 3);
  AwaitApplied(*f, 3);
  // Three steps saved, none synced yet: a crash goes back to the start.
  const int64_t synced = f->fs.syncs();
  EXPECT_EQ(StepsAfterMachineCrash(*f), 0);
  // Once the interval (10 min: long polls advance the fake clock too) has
  // passed, the reaper's look syncs the state once.
  f->clock.Advance(absl::Minutes(10));
  f->coordinator->CheckTimeouts();
  EXPECT_EQ(f->fs.syncs(), synced + 1);
  f->coordinator->CheckTimeouts();
  EXPECT_EQ(f->fs.syncs(), synced + 1);  // nothing new to sync
  EXPECT_EQ(StepsAfterMachineCrash(*f), 3);
  next = Steps(*f, w, next, 2);
  ASSERT_EQ(next.step(), 5);
  AwaitApplied(*f, 5);
  EXPECT_EQ(StepsAfterMachineCrash(*f), 3);  // at most an interval lost
  // A stop syncs at once.
  f->coordinator->Shutdown();
  EXPECT_EQ(StepsAfterMachineCrash(*f), 5);
}

TEST(CoordinatorStateSyncTest, AZeroIntervalSyncsEverySave) {
  std::unique_ptr<Fixture> f = JobSyncingEvery(absl::ZeroDuration());
  const std::string w = f->Join();
  auto lease = Next(*f, w);
  ASSERT_TRUE(lease.ok()) << lease.status();
  const int64_t before = f->fs.syncs();
  const v1::NextTaskResponse next = Steps(*f, w, *lease, 3);
  ASSERT_EQ(next.step(), 3);
  AwaitApplied(*f, 3);
  EXPECT_GE(f->fs.syncs(), before + 3);
  EXPECT_EQ(StepsAfterMachineCrash(*f), 3);
}

// The shards applied steps the crashed state does not hold: the resumed
// coordinator restores them to a version it knows (here, with no
// checkpoint, the start) and takes its accounting back with them, so the
// lost steps' samples are trained again, once.
TEST(CoordinatorStateSyncTest, AStateDirectoryThatCannotBeWrittenIsShown) {
  std::unique_ptr<Fixture> f = JobSyncingEvery(absl::ZeroDuration());
  const std::string w = f->Join();
  auto lease = Next(*f, w);
  ASSERT_TRUE(lease.ok()) << lease.status();
  v1::NextTaskResponse next = Steps(*f, w, *lease, 1);
  AwaitApplied(*f, 1);
  EXPECT_EQ(f->coordinator->Status().state_error(), "");
  // The state directory fills up: training goes on, the status says why
  // a restart would go back, once (one event for a run of failures).
  f->fs.FailWrites(absl::ResourceExhaustedError("No space left on device"));
  next = Steps(*f, w, next, 3);
  AwaitApplied(*f, 4);
  ASSERT_TRUE(WaitForStatus(*f->coordinator, [](const v1::StatusResponse& st) {
    return !st.state_error().empty();
  }));
  v1::StatusResponse s = f->coordinator->Status();
  EXPECT_NE(s.state_error().find("No space left on device"), std::string::npos)
      << s.state_error();
  EXPECT_NE(s.state_error().find("/state"), std::string::npos);
  EXPECT_EQ(CountJobEvents(s, "state_save_failed"), 1);
  EXPECT_EQ(s.error(), "");  // the job itself is fine
  // A crash now goes back to what was saved before the failures.
  EXPECT_LE(StepsAfterMachineCrash(*f), 1);
  // Space again: the next save clears it (the save may trail the step's
  // finalize, so wait for it), and what is saved holds the steps applied
  // while saves failed.
  f->fs.FailWrites(absl::OkStatus());
  next = Steps(*f, w, next, 1);
  AwaitApplied(*f, 5);
  ASSERT_TRUE(WaitForStatus(*f->coordinator, [](const v1::StatusResponse& st) {
    return st.state_error().empty();
  }));
  EXPECT_EQ(CountJobEvents(f->coordinator->Status(), "state_saved"), 1);
  EXPECT_GE(StepsAfterMachineCrash(*f), 4);
}

TEST(CoordinatorStateSyncTest, ShardsAheadOfTheCrashedStateGoBackWithIt) {
  std::unique_ptr<Fixture> f = JobSyncingEvery(absl::Minutes(10));
  {
    absl::MutexLock lock(&f->shards.mu);
    f->shards.versions = {0};  // one shard, tracked
  }
  const std::string w = f->Join();
  auto lease = Next(*f, w);
  ASSERT_TRUE(lease.ok()) << lease.status();
  v1::NextTaskResponse next = Steps(*f, w, *lease, 3);
  AwaitApplied(*f, 3);
  f->clock.Advance(absl::Minutes(10));
  f->coordinator->CheckTimeouts();  // synced at 3
  next = Steps(*f, w, next, 2);
  AwaitApplied(*f, 5);  // the shards are at 5

  const std::unique_ptr<InMemoryFileSystem> crashed = f->fs.AfterMachineCrash();
  CoordinatorOptions options = f->options;
  options.file_system = crashed.get();
  auto resumed = Coordinator::Create(options, &f->shards);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_TRUE(WaitForShards(
      f->shards, [](FakeShardControl& s) { return !s.restores.empty(); }));
  {
    absl::MutexLock lock(&f->shards.mu);
    EXPECT_EQ(f->shards.restores.back(), 0);
  }
  // It resumed at 3 and goes back to 0 with the shards.
  EXPECT_TRUE(WaitForStatus(**resumed, [](const v1::StatusResponse& s) {
    return s.step() == 0 && s.samples_applied() == 0;
  }));
  (*resumed)->Shutdown();
}

}  // namespace
}  // namespace ferry

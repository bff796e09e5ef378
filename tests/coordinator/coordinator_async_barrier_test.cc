// Exactly-once for async jobs (coordinator/coordinator_async_barrier.cc):
// the barrier's consistent cuts, and how it takes the shards and the
// accounting back when a shard lost updates or holds an uncounted push. The
// fake shards play the real ones: a test adds one to every version a push
// reaches, as an async shard applies each push on arrival.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace ferry {
namespace {

// Async, batch 4 (4 samples a task for one worker, 2 for two), 24 samples
// an epoch, a consistent cut every 2 tasks.
constexpr int64_t kEpochSize = 24;
constexpr int64_t kCutEvery = 2;
v1::JobSpec AsyncJob() { return Job(4, 1, v1::CONSISTENCY_ASYNC); }

// Two shards at version 0.
void TwoShards(Fixture& f) {
  absl::MutexLock lock(&f.shards.mu);
  f.shards.versions = {0, 0};
}

// What a worker's pushes do to the shards: each reached shard applies it.
void Push(Fixture& f, const std::vector<int>& shards = {0, 1}) {
  absl::MutexLock lock(&f.shards.mu);
  for (int s : shards) ++f.shards.versions[s];
}

std::vector<int64_t> Checkpoints(Fixture& f) {
  absl::MutexLock lock(&f.shards.mu);
  return f.shards.checkpoints;
}

std::vector<int64_t> Restores(Fixture& f) {
  absl::MutexLock lock(&f.shards.mu);
  return f.shards.restores;
}

// `worker` leases a task, pushes it to every shard and reports it; returns
// the lease.
v1::NextTaskResponse Task(Fixture& f, const std::string& worker) {
  auto lease = NextWork(f, worker);
  EXPECT_TRUE(lease.ok()) << lease.status();
  if (!lease.ok()) return {};
  EXPECT_EQ(lease->action(), v1::NextTaskResponse::TRAIN);
  Push(f);
  v1::NextTaskRequest report;
  report.set_worker_id(worker);
  *report.mutable_done() = Done(*lease);
  report.set_report_only(true);
  EXPECT_TRUE(Call(f, report).ok());
  return *lease;
}

TEST(CoordinatorAsyncBarrierTest, StartAndEveryNthTaskAreConsistentCuts) {
  Fixture f(AsyncJob(), kEpochSize, 1, "", kCutEvery);
  TwoShards(f);
  const std::string a = f.Join();
  const v1::NextTaskResponse first = Task(f, a);
  // The first lease waited for the cut at the job's start, under the
  // generation the shards were fenced at.
  {
    absl::MutexLock lock(&f.shards.mu);
    ASSERT_FALSE(f.shards.fences.empty());
    EXPECT_EQ(f.shards.fences.front(), first.generation());
  }
  Task(f, a);
  Task(f, a);  // leased after the cut at 2
  EXPECT_EQ(Checkpoints(f), (std::vector<int64_t>{0, 2}));
  EXPECT_TRUE(Restores(f).empty());
  EXPECT_EQ(CountJobEvents(f.coordinator->Status(), "async_checkpoint"), 2);
}

TEST(CoordinatorAsyncBarrierTest, ShardThatLostUpdatesGoesBackWithTheJob) {
  Fixture f(AsyncJob(), kEpochSize, 1, "", kCutEvery);
  TwoShards(f);
  const std::string a = f.Join();
  std::vector<v1::NextTaskResponse> leases;
  for (int i = 0; i < 3; ++i) leases.push_back(Task(f, a));  // cut at 2
  // Shard 1 restarts from its checkpoint at 2: task 2's update is gone.
  {
    absl::MutexLock lock(&f.shards.mu);
    f.shards.versions = {3, 2};
  }
  // The coordinator sees it (it watches the shards when idle), runs the
  // barrier: every shard back at 2, and task 2's samples leased again.
  ASSERT_TRUE(WaitForStatus(*f.coordinator, [](const v1::StatusResponse& s) {
    return CountJobEvents(s, "async_rolled_back") == 1;
  }));
  auto again = NextWork(f, a);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(Restores(f), (std::vector<int64_t>{2}));
  ASSERT_GT(again->tasks_size(), 0);
  EXPECT_EQ(again->tasks(0).begin(), leases[2].tasks(0).begin());
  const v1::StatusResponse s = f.coordinator->Status();
  EXPECT_EQ(CountJobEvents(s, "async_rolled_back"), 1);
  EXPECT_EQ(s.step(), 2);  // applied tasks back at the cut
  EXPECT_TRUE(s.error().empty()) << s.error();
}

TEST(CoordinatorAsyncBarrierTest, UncountedPushOfALostWorkerIsUndone) {
  Fixture f(AsyncJob(), kEpochSize, 1, "", kCutEvery);
  TwoShards(f);
  const std::string a = f.Join(), b = f.Join();
  Task(f, a);
  Task(f, b);  // cut at 2
  // a leases a task, reaches shard 0 only, and is lost: its task goes back
  // to the queue while shard 0 holds half of it.
  auto lost = NextWork(f, a);
  ASSERT_TRUE(lost.ok());
  Push(f, {0});
  ASSERT_TRUE(f.coordinator->Leave(a).ok());
  // b applies that task (2) and the next one (3): the cut at 4 finds shard
  // 0 one push ahead and goes back to 2.
  const v1::NextTaskResponse redo = Task(f, b);
  EXPECT_EQ(redo.tasks(0).begin(), lost->tasks(0).begin());
  Task(f, b);
  auto after = NextWork(f, b);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(Restores(f), (std::vector<int64_t>{2}));
  // Task 2's samples again, then the job goes on to its end exactly once.
  EXPECT_EQ(after->tasks(0).begin(), lost->tasks(0).begin());
  Push(f);
  v1::NextTaskRequest report;
  report.set_worker_id(b);
  *report.mutable_done() = Done(*after);
  report.set_report_only(true);
  ASSERT_TRUE(Call(f, report).ok());
  // Samples 0-3 (before the cut at 2) and `after`'s are applied; b takes
  // the rest of the epoch.
  auto samples = [](const v1::NextTaskResponse& lease) {
    int64_t n = 0;
    for (const v1::DataTask& t : lease.tasks()) n += t.end() - t.begin();
    return n;
  };
  for (int64_t done = 4 + samples(*after); done < kEpochSize;) {
    done += samples(Task(f, b));
  }
  ASSERT_TRUE(WaitForStatus(*f.coordinator, [](const v1::StatusResponse& s) {
    return s.accounting_size() == 1;
  }));
  const v1::StatusResponse s = f.coordinator->Status();
  EXPECT_EQ(s.accounting(0).samples_applied(), 24);
  EXPECT_EQ(s.accounting(0).samples_dropped(), 0);
  absl::MutexLock lock(&f.shards.mu);
  // Every shard holds exactly the applied tasks, and the epoch's end was a
  // cut too.
  EXPECT_EQ(f.shards.versions[0], s.step());
  EXPECT_EQ(f.shards.versions[1], s.step());
  EXPECT_EQ(f.shards.checkpoints.back(), s.step());
}

TEST(CoordinatorAsyncBarrierTest, MaxStepsEndIsACutBeforeTheJobFinishes) {
  v1::JobSpec job = AsyncJob();
  job.set_max_steps(3);
  Fixture f(job, kEpochSize, 1, "", /*checkpoint_every=*/0);
  TwoShards(f);
  const std::string a = f.Join();
  for (int i = 0; i < 3; ++i) Task(f, a);
  auto end = NextWork(f, a);
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_EQ(end->action(), v1::NextTaskResponse::FINISH);
  // Cuts at the start and at the job's end, none between.
  EXPECT_EQ(Checkpoints(f), (std::vector<int64_t>{0, 3}));
}

}  // namespace
}  // namespace ferry

// The coordinator under churn: ring steps aborted and re-formed, shard
// rollbacks with the accounting, and a restart from the saved state.
#include <algorithm>
#include <functional>
#include <future>
#include <string>
#include <vector>

#include "coordinator/coordinator.h"
#include "gtest/gtest.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace ferry {
namespace {

v1::JobSpec RingJob(int batch, int epochs) {
  v1::JobSpec job = Job(batch, epochs);
  job.set_mode(v1::MODE_RING);
  return job;
}

// A sync PS job whose shards sum on arrival.
v1::JobSpec SumOnArrivalJob(int batch, int epochs) {
  v1::JobSpec job = Job(batch, epochs);
  job.set_sum_on_arrival(true);
  return job;
}

// Two fake shards at version 0.
void TwoShardsAtVersionZero(Fixture& f) {
  absl::MutexLock lock(&f.shards.mu);
  f.shards.versions = {0, 0};
}

// `worker` reports the step of `lease` done without asking for more.
absl::Status ReportOnly(Fixture& f, const std::string& worker,
                        const v1::NextTaskResponse& lease) {
  v1::NextTaskRequest report;
  report.set_worker_id(worker);
  *report.mutable_done() = Done(lease);
  report.set_report_only(true);
  return Call(f, report).status();
}

int64_t Fence(Coordinator& c, const std::string& worker) {
  auto beat = c.Heartbeat(worker);
  return beat.ok() ? beat->fence() : -1;
}

// Finalize on push: a step applied on push raises no fence, so the shards
// hear of every new generation (a join, a departure) from the coordinator
// at once; an unreachable shard is recorded and left to the next finalize.
TEST(CoordinatorElasticTest, ShardsAreFencedWhenTheGenerationMoves) {
  Fixture f(Job(10, 1), 20);
  (void)f.Join();
  auto generation = [&] { return f.coordinator->Status().generation(); };
  auto fenced_at = [&](int64_t g) {
    return WaitForShards(f.shards, [g](FakeShardControl& s) {
      return !s.fences.empty() && s.fences.back() == g;
    });
  };
  EXPECT_TRUE(fenced_at(generation()));
  const std::string b = f.Join();
  EXPECT_TRUE(fenced_at(generation()));
  {
    absl::MutexLock lock(&f.shards.mu);
    f.shards.fence_unreachable = true;
  }
  ASSERT_TRUE(f.coordinator->Leave(b).ok());
  EXPECT_TRUE(WaitForStatus(*f.coordinator, [](const v1::StatusResponse& s) {
    return HasEvent(s, "fence_failed");
  }));
  {
    absl::MutexLock lock(&f.shards.mu);
    f.shards.fence_unreachable = false;
  }
  (void)f.Join();
  EXPECT_TRUE(fenced_at(generation()));

  // The coordinator's finalize raises the fence itself: no Fence calls.
  Fixture off(Job(10, 1), 20);
  off.coordinator.reset();
  off.options.finalize_on_push = false;
  off.shards.fences.clear();  // the fixture's first coordinator's
  off.coordinator = *Coordinator::Create(off.options, &off.shards);
  const std::string oa = off.Join();
  auto lease = Next(off, oa);
  ASSERT_TRUE(lease.ok());
  absl::MutexLock lock(&off.shards.mu);
  EXPECT_TRUE(off.shards.fences.empty());
}

// PS sync, finalize on push: the only member leaves holding a step and the
// next one it prefetched, having pushed neither. Nobody can push to either:
// both are formed again for the members that come next, from the same
// samples, under a newer fence (never finalized without contributors).
TEST(CoordinatorElasticTest, StepsWhoseContributorsAreAllGoneAreFormedAgain) {
  Fixture f(Job(10, 1), 20);
  TwoShardsAtVersionZero(f);
  const std::string a = f.Join();
  auto first = Next(f, a);
  ASSERT_TRUE(first.ok() && first->action() == v1::NextTaskResponse::TRAIN);
  ASSERT_EQ(first->step(), 0);
  v1::NextTaskRequest prefetch;
  prefetch.set_worker_id(a);
  prefetch.set_after_step(0);
  prefetch.set_fence(first->fence());
  auto second = Call(f, prefetch);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(second->action(), v1::NextTaskResponse::TRAIN);
  ASSERT_EQ(second->step(), 1);
  ASSERT_TRUE(f.coordinator->Leave(a).ok());

  const std::string b = f.Join();
  auto again = NextWork(f, b);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->action(), v1::NextTaskResponse::TRAIN);
  EXPECT_EQ(again->step(), 0);
  EXPECT_GT(again->fence(), first->fence());
  int64_t samples = 0;
  for (const auto& t : again->tasks()) samples += t.end() - t.begin();
  EXPECT_EQ(samples, 10);
  {
    absl::MutexLock lock(&f.shards.mu);
    EXPECT_TRUE(f.shards.finalized.empty());  // nothing without contributors
  }
  // The job goes on to its end with b alone: every sample once.
  v1::StepReport done = Done(*again);
  auto next = NextWork(f, b, &done);
  ASSERT_TRUE(next.ok()) << next.status();
  ASSERT_EQ(next->action(), v1::NextTaskResponse::TRAIN);
  EXPECT_EQ(next->step(), 1);
  done = Done(*next);
  auto end = NextWork(f, b, &done);
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_EQ(end->action(), v1::NextTaskResponse::FINISH);
  const v1::StatusResponse s = f.coordinator->Status();
  ASSERT_EQ(s.accounting_size(), 1);
  EXPECT_EQ(s.accounting(0).samples_applied(), 20);
}

TEST(CoordinatorElasticTest, RingMemberLeavingMidStepAbortsTheStepForEveryone) {
  Fixture f(RingJob(10, 1), 20);
  const std::string a = f.Join(), b = f.Join();
  auto ra = Next(f, a);
  auto rb = Next(f, b);
  ASSERT_TRUE(ra.ok() && rb.ok());
  ASSERT_EQ(ra->ring_size(), 2);
  const int64_t fence = Fence(*f.coordinator, a);
  // a finished its part of the all-reduce; b leaves before reporting: the
  // ring could not have finished, so nobody may keep step 0.
  v1::NextTaskRequest report;
  report.set_worker_id(a);
  *report.mutable_done() = Done(*ra);
  report.set_report_only(true);
  ASSERT_TRUE(Call(f, report).ok());
  ASSERT_TRUE(f.coordinator->Leave(b).ok());
  EXPECT_GT(Fence(*f.coordinator, a), fence);

  auto again = NextWork(f, a);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->action(), v1::NextTaskResponse::TRAIN);
  EXPECT_EQ(again->step(), 0);
  EXPECT_EQ(again->committed_steps(), 0);
  ASSERT_EQ(again->ring_size(), 1);
  EXPECT_EQ(again->ring(0).worker_id(), a);
  EXPECT_GT(again->ring_generation(), ra->ring_generation());
  EXPECT_GT(again->fence(), ra->fence());
  // The whole global batch again, in its old order.
  int64_t samples = 0;
  for (const auto& t : again->tasks()) samples += t.end() - t.begin();
  EXPECT_EQ(samples, 10);
  EXPECT_EQ(again->tasks(0).begin(), 0);
  const v1::StatusResponse s = f.coordinator->Status();
  EXPECT_EQ(s.aborted_steps(), 1);
  EXPECT_TRUE(HasEvent(s, "step_aborted"));
  EXPECT_TRUE(HasEvent(s, "left"));
}

// Shards that sum on arrival cannot take a summed push out of a step: a
// member lost before it reported aborts the step instead of shrinking its
// set, the shards' open step is rolled back (a restore to the version they
// are at), and the step is formed again over the members left.
TEST(CoordinatorElasticTest, SumOnArrivalLostMemberAbortsAndRollsBackTheStep) {
  Fixture f(SumOnArrivalJob(10, 1), 20);
  TwoShardsAtVersionZero(f);
  const std::string a = f.Join(), b = f.Join();
  auto ra = Next(f, a);
  auto rb = Next(f, b);
  ASSERT_TRUE(ra.ok() && rb.ok());
  ASSERT_EQ(ra->step_contributors_size(), 2);
  ASSERT_TRUE(ReportOnly(f, a, *ra).ok());
  ASSERT_TRUE(f.coordinator->Leave(b).ok());

  EXPECT_TRUE(WaitForShards(f.shards, [](FakeShardControl& s) {
    return s.restores == std::vector<int64_t>{0};
  }));
  auto again = NextWork(f, a);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->action(), v1::NextTaskResponse::TRAIN);
  EXPECT_EQ(again->step(), 0);
  EXPECT_GT(again->fence(), ra->fence());
  ASSERT_EQ(again->step_contributors_size(), 1);
  int64_t samples = 0;
  for (const auto& t : again->tasks()) samples += t.end() - t.begin();
  EXPECT_EQ(samples, 10);  // a's share and b's, trained again
  {
    absl::MutexLock lock(&f.shards.mu);
    EXPECT_TRUE(f.shards.finalized.empty());  // nothing over {a} alone
  }
  const v1::StatusResponse s = f.coordinator->Status();
  EXPECT_EQ(s.aborted_steps(), 1);
  EXPECT_TRUE(HasEvent(s, "step_aborted"));
  EXPECT_FALSE(HasEvent(s, "shards_rolled_back"));  // no checkpoint lost
}

// A recovery while a step waits to be finalized (every member reported it,
// the finalizer is busy with the one before) that every shard applied on
// push already: it counts as applied, not undone. Here b leaves in step 2
// (sum on arrival: the step is aborted and the shards rolled back) while
// step 0's finalize stands still and step 1 waits behind it.
TEST(CoordinatorElasticTest, ARecoveryKeepsTheQueuedStepsEveryShardApplied) {
  Fixture f(SumOnArrivalJob(10, 1), 100);
  TwoShardsAtVersionZero(f);
  {
    absl::MutexLock lock(&f.shards.mu);
    f.shards.finalize_open = false;
  }
  const std::string a = f.Join(), b = f.Join();
  auto next = [&](const std::string& w, int64_t after) {
    v1::NextTaskRequest request;
    request.set_worker_id(w);
    request.set_after_step(after);
    return Call(f, request);
  };
  for (int64_t step = 0; step < 2; ++step) {
    auto ra = next(a, step - 1), rb = next(b, step - 1);
    ASSERT_TRUE(ra.ok() && rb.ok());
    ASSERT_EQ(ra->step(), step);
    ASSERT_EQ(rb->step(), step);
    ASSERT_TRUE(ReportOnly(f, a, *ra).ok());
    ASSERT_TRUE(ReportOnly(f, b, *rb).ok());
  }
  auto ra2 = next(a, 1);
  ASSERT_TRUE(ra2.ok());
  ASSERT_EQ(ra2->step(), 2);
  ASSERT_TRUE(ReportOnly(f, a, *ra2).ok());
  // The finalizer is inside step 0's FinalizeStep (held there) before b
  // leaves: the recovery then runs once the shards are at version 2.
  ASSERT_TRUE(WaitForShards(f.shards, [](FakeShardControl& s) {
    return !s.begun.empty() && s.begun.front() == 0;
  }));
  ASSERT_TRUE(f.coordinator->Leave(b).ok());  // b never reports step 2
  {
    absl::MutexLock lock(&f.shards.mu);
    f.shards.versions = {2, 2};  // steps 0 and 1 applied on push
    f.shards.finalize_open = true;
  }
  EXPECT_TRUE(WaitForShards(f.shards, [](FakeShardControl& s) {
    return s.restores == std::vector<int64_t>{2};
  }));
  EXPECT_TRUE(WaitForStatus(*f.coordinator, [](const v1::StatusResponse& s) {
    return s.step() == 2;
  }));
  const v1::StatusResponse s = f.coordinator->Status();
  EXPECT_TRUE(HasEvent(s, "step_recovered"));
  EXPECT_FALSE(HasEvent(s, "shards_rolled_back"));
  auto again = NextWork(f, a);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->step(), 2);
}

// Hybrid: the ring's members keep their dense state at each checkpoint
// version (keep_state leases). When the last member holding the newest
// checkpoint's copy leaves, the next step formed is checkpointed (its lease
// keeps the state, the shards are checkpointed at its version), so that a
// shard rollback has a version the ring can go back to.
TEST(CoordinatorElasticTest, HybridForcesACheckpointWhenItsCopiesAreGone) {
  v1::JobSpec job = Job(10, 1);
  job.set_mode(v1::MODE_HYBRID);
  Fixture f(job, 200, 1, "", /*checkpoint_every=*/3);
  TwoShardsAtVersionZero(f);
  // Every member of `ring` takes the next lease and reports it; returns
  // whether that lease kept the state.
  auto ring_step = [&](const std::vector<std::string>& ring, int64_t step) {
    std::vector<v1::NextTaskResponse> leases;
    for (const std::string& w : ring) {
      auto r = NextWork(f, w);
      EXPECT_TRUE(r.ok() && r->action() == v1::NextTaskResponse::TRAIN);
      EXPECT_EQ(r->step(), step) << w;
      leases.push_back(*r);
    }
    for (size_t i = 0; i < ring.size(); ++i) {
      EXPECT_TRUE(ReportOnly(f, ring[i], leases[i]).ok());
    }
    EXPECT_TRUE(WaitForStatus(*f.coordinator, [&](const v1::StatusResponse& s) {
      return s.step() == step + 1;
    }));
    return leases.front().keep_state();
  };
  const std::string a = f.Join(), b = f.Join();
  for (int64_t step = 0; step < 4; ++step) {
    EXPECT_EQ(ring_step({a, b}, step), step == 0 || step == 3) << step;
  }
  const std::string c = f.Join();
  EXPECT_FALSE(ring_step({a, b, c}, 4));
  ASSERT_TRUE(f.coordinator->Leave(a).ok());
  EXPECT_FALSE(HasEvent(f.coordinator->Status(), "checkpoint_forced"));
  ASSERT_TRUE(f.coordinator->Leave(b).ok());  // c holds no copy of 3
  EXPECT_TRUE(HasEvent(f.coordinator->Status(), "checkpoint_forced"));
  EXPECT_TRUE(ring_step({c}, 5));
  EXPECT_TRUE(WaitForShards(f.shards, [](FakeShardControl& s) {
    return std::find(s.checkpoints.begin(), s.checkpoints.end(), 5) !=
           s.checkpoints.end();
  }));
  EXPECT_TRUE(ring_step({c}, 6));   // 6 % 3 == 0, as always
  EXPECT_FALSE(ring_step({c}, 7));  // forced once
}

TEST(CoordinatorElasticTest, RingFailedReportAbortsTheStepAndThePrefetchedOne) {
  Fixture f(RingJob(10, 1), 40);
  const std::string a = f.Join(), b = f.Join();
  auto ra = Next(f, a);
  auto rb = Next(f, b);
  ASSERT_TRUE(ra.ok() && rb.ok());
  v1::NextTaskRequest prefetch;
  prefetch.set_worker_id(a);
  prefetch.set_after_step(0);
  auto next = Call(f, prefetch);
  ASSERT_TRUE(next.ok());
  ASSERT_EQ(next->step(), 1);

  v1::NextTaskRequest failed;
  failed.set_worker_id(b);
  failed.mutable_done()->set_step(0);
  failed.mutable_done()->set_fence(rb->fence());
  failed.mutable_done()->set_failed(true);
  failed.set_report_only(true);
  ASSERT_TRUE(Call(f, failed).ok());
  // a's success report for the aborted step is refused.
  v1::NextTaskRequest late;
  late.set_worker_id(a);
  *late.mutable_done() = Done(*ra);
  late.set_report_only(true);
  EXPECT_TRUE(absl::IsAborted(Call(f, late).status()));

  auto a0 = NextWork(f, a);
  auto b0 = NextWork(f, b);
  ASSERT_TRUE(a0.ok() && b0.ok());
  EXPECT_EQ(a0->step(), 0);
  EXPECT_EQ(b0->step(), 0);
  EXPECT_EQ(a0->ring_generation(), b0->ring_generation());
  EXPECT_GT(a0->ring_generation(), ra->ring_generation());
  EXPECT_EQ(a0->tasks(0).begin(), 0);
  EXPECT_EQ(f.coordinator->Status().aborted_steps(), 2);
}

// A ring job goes on after its coordinator restarted: the members it kept
// report the steps they were on (refused: the old run's leases are void),
// and their prefetches, which name the last lease they hold and its fence,
// get that step again, re-formed over both of them.
TEST(CoordinatorElasticTest, RingJobGoesOnAfterACoordinatorRestart) {
  Fixture f(RingJob(10, 2), 40, 2, "state");
  const std::string a = f.Join(), b = f.Join();
  // Steps 0-2 applied; every abort raises the fence the leases carry.
  for (int step = 0; step < 3; ++step) {
    auto ra = Next(f, a);
    auto rb = Next(f, b);
    ASSERT_TRUE(ra.ok() && rb.ok());
    ASSERT_EQ(ra->step(), step);
    // Step 1: collectives that fail (a member being replaced, say) have
    // the step formed again, four times.
    for (int attempt = 0; step == 1 && attempt < 4; ++attempt) {
      v1::StepReport failed;
      failed.set_step(step);
      failed.set_fence(ra->fence());
      failed.set_failed(true);
      v1::NextTaskRequest report;
      report.set_worker_id(a);
      *report.mutable_done() = failed;
      report.set_report_only(true);
      ASSERT_TRUE(Call(f, report).ok());
      ra = Next(f, a);
      rb = Next(f, b);
      ASSERT_TRUE(ra.ok() && rb.ok());
      ASSERT_EQ(ra->step(), step);
    }
    ASSERT_TRUE(ReportOnly(f, a, *ra).ok());
    ASSERT_TRUE(ReportOnly(f, b, *rb).ok());
    ASSERT_TRUE(WaitForStatus(
        *f.coordinator,
        [step](const v1::StatusResponse& s) { return s.step() == step + 1; }));
  }
  // Step 3 is leased to both; the coordinator dies before they report.
  auto ra = Next(f, a);
  auto rb = Next(f, b);
  ASSERT_TRUE(ra.ok() && rb.ok());
  ASSERT_EQ(ra->step(), 3);
  ASSERT_GE(ra->fence(), 4);  // above what a restart without it would give
  f.coordinator->Shutdown();
  f.coordinator.reset();
  auto restarted = f.Restart();
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  f.coordinator = std::move(*restarted);
  EXPECT_TRUE(absl::IsAborted(ReportOnly(f, a, *ra)));
  EXPECT_TRUE(absl::IsAborted(ReportOnly(f, b, *rb)));
  // A prefetching worker asks for the step after the one it holds.
  for (const auto& [worker, held] : {std::pair{a, *ra}, std::pair{b, *rb}}) {
    v1::NextTaskRequest ask;
    ask.set_worker_id(worker);
    ask.set_after_step(held.step());
    ask.set_fence(held.fence());
    auto lease = Call(f, ask);
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_EQ(lease->action(), v1::NextTaskResponse::TRAIN) << worker;
    EXPECT_EQ(lease->step(), 3) << worker;
    EXPECT_GT(lease->fence(), held.fence()) << worker;
    EXPECT_EQ(lease->ring_size(), 2) << worker;
  }
  EXPECT_EQ(f.coordinator->Status().restarts(), 1);
}

TEST(CoordinatorElasticTest, StateOfAnotherJobIsRefused) {
  Fixture f(Job(4, 1), 16, 1, "state");
  f.coordinator->Shutdown();
  ASSERT_GT(f.fs.writes(), 0);
  CoordinatorOptions options = f.options;
  options.job = Job(8, 1);
  auto c = Coordinator::Create(options, &f.shards);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(c.status())) << c.status();
}

}  // namespace

}  // namespace ferry

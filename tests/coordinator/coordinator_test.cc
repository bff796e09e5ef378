#include "coordinator/coordinator.h"

#include <future>
#include <optional>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace ferry {
namespace {

TEST(CoordinatorTest, SyncStepsSplitTheGlobalBatchInRankOrder) {
  Fixture f(Job(10, 1), 25, /*min_workers=*/2);
  const std::string a = f.Join(), b = f.Join();
  auto ra = Next(f, a);
  auto rb = Next(f, b);
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(ra->action(), v1::NextTaskResponse::TRAIN);
  EXPECT_EQ(ra->step(), 0);
  EXPECT_EQ(rb->step(), 0);
  // Step 0 = positions [0, 10): rank 0 takes [0, 5), rank 1 [5, 10).
  EXPECT_EQ(ra->tasks(0).begin(), 0);
  EXPECT_EQ(ra->tasks(0).end(), 5);
  EXPECT_EQ(rb->tasks(0).begin(), 5);
  EXPECT_EQ(rb->tasks(0).end(), 10);
}

// Finalize on push: a PS sync lease names the step's whole contributor set
// (rank order, each worker's samples), except for a step whose start
// version is checkpointed (the shards must wait there for the coordinator)
// and in quorum jobs (the coordinator picks the set).
TEST(CoordinatorTest, LeasesNameTheStepsContributorsForFinalizeOnPush) {
  auto names = [](const v1::NextTaskResponse& r) {
    std::vector<std::pair<std::string, int64_t>> set;
    for (const v1::Contributor& c : r.step_contributors())
      set.emplace_back(c.worker_id(), c.num_samples());
    return set;
  };
  Fixture f(Job(10, 1), 50, /*min_workers=*/2, "", /*checkpoint_every=*/2);
  const std::string a = f.Join(), b = f.Join();
  for (int64_t step = 0; step < 3; ++step) {
    auto ra = Next(f, a);
    auto rb = Next(f, b);
    ASSERT_TRUE(ra.ok() && rb.ok());
    ASSERT_EQ(ra->step(), step);
    ASSERT_EQ(rb->step(), step);
    const std::vector<std::pair<std::string, int64_t>> expected =
        step == 2
            ? std::vector<std::pair<std::string, int64_t>>{}
            : std::vector<std::pair<std::string, int64_t>>{{a, 5}, {b, 5}};
    EXPECT_EQ(names(*ra), expected) << "step " << step;
    EXPECT_EQ(names(*rb), expected) << "step " << step;
    const v1::StepReport da = Done(*ra), db = Done(*rb);
    ASSERT_TRUE(Next(f, a, &da).ok());
    ASSERT_TRUE(Next(f, b, &db).ok());
    WaitForFinalize(f.shards, static_cast<size_t>(step + 1));
  }

  v1::JobSpec quorum = Job(10, 1);
  quorum.set_sync_quorum(1);
  Fixture q(quorum, 20, /*min_workers=*/2);
  const std::string qa = q.Join(), qb = q.Join();
  auto lease = Next(q, qa);
  ASSERT_TRUE(lease.ok());
  EXPECT_TRUE(names(*lease).empty());

  Fixture off(Job(10, 1), 20);
  off.coordinator.reset();
  off.options.finalize_on_push = false;
  off.coordinator = *Coordinator::Create(off.options, &off.shards);
  const std::string oa = off.Join();
  lease = Next(off, oa);
  ASSERT_TRUE(lease.ok());
  EXPECT_TRUE(names(*lease).empty());
}

TEST(CoordinatorTest, SyncRunsAllEpochsAndAccountsEverySampleOnce) {
  Fixture f(Job(8, 2), 21);
  const std::string a = f.Join(), b = f.Join();
  auto ra = Next(f, a);
  auto rb = Next(f, b);
  int guard = 0;
  while (++guard < 200) {
    ASSERT_TRUE(ra.ok() && rb.ok()) << ra.status() << rb.status();
    if (ra->action() == v1::NextTaskResponse::FINISH &&
        rb->action() == v1::NextTaskResponse::FINISH)
      break;
    auto da = Done(*ra), db = Done(*rb);
    auto a_task = ra->action() == v1::NextTaskResponse::TRAIN;
    auto b_task = rb->action() == v1::NextTaskResponse::TRAIN;
    // Both report, then ask again (the first may wait for the second).
    std::future<absl::StatusOr<v1::NextTaskResponse>> fa = std::async(
        std::launch::async,
        [&] { return a_task ? NextWork(f, a, &da) : NextWork(f, a); });
    rb = b_task ? NextWork(f, b, &db) : NextWork(f, b);
    ra = fa.get();
  }
  ASSERT_TRUE(f.coordinator->WaitUntilFinished(absl::Seconds(5)));
  const v1::StatusResponse s = f.coordinator->Status();
  ASSERT_EQ(s.accounting_size(), 2);
  for (const auto& acc : s.accounting()) {
    EXPECT_EQ(acc.samples_applied(), 21);
    EXPECT_EQ(acc.samples_dropped(), 0);
  }
  // 21 samples / batch 8 = 3 steps per epoch (8, 8, 5).
  EXPECT_EQ(s.step(), 6);
  EXPECT_EQ(f.shards.finalized.size(), 6u);
  EXPECT_EQ(f.shards.finalized[2].second.size(), 2u);
  EXPECT_EQ(f.shards.finalized[2].second[0].num_samples() +
                f.shards.finalized[2].second[1].num_samples(),
            5);
  EXPECT_TRUE(s.finished());
  EXPECT_EQ(s.evals_size(), 2);  // after epoch 0, and the final one
}

TEST(CoordinatorTest, WorkerLeavingMidStepIsDroppedAndItsSamplesReleased) {
  Fixture f(Job(10, 1), 10, /*min_workers=*/1);
  const std::string a = f.Join(), b = f.Join();
  auto ra = Next(f, a);
  auto rb = Next(f, b);
  ASSERT_TRUE(ra.ok() && rb.ok());
  auto da = Done(*ra);
  // a pushed; b leaves before pushing: step 0 finalizes over {a} only.
  std::future<absl::StatusOr<v1::NextTaskResponse>> fa =
      std::async(std::launch::async, [&] { return NextWork(f, a, &da); });
  ASSERT_TRUE(f.coordinator->Leave(b).ok());
  auto next = fa.get();
  ASSERT_TRUE(next.ok());
  // Step 1 may be handed out while step 0 is still being finalized (its
  // pull waits for version 1): wait for the finalizer.
  WaitForFinalize(f.shards);
  {
    absl::MutexLock lock(&f.shards.mu);
    ASSERT_EQ(f.shards.finalized.size(), 1u);
    ASSERT_EQ(f.shards.finalized[0].second.size(), 1u);
    EXPECT_EQ(f.shards.finalized[0].second[0].worker_id(), a);
  }
  // b's samples [5, 10) come back to a in the next step.
  ASSERT_EQ(next->action(), v1::NextTaskResponse::TRAIN);
  EXPECT_EQ(next->step(), 1);
  EXPECT_EQ(next->tasks(0).begin(), 5);
  EXPECT_EQ(next->tasks(0).end(), 10);
  const v1::StepReport next_done = Done(*next);
  auto last = NextWork(f, a, &next_done);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->action(), v1::NextTaskResponse::FINISH);
  const v1::StatusResponse s = f.coordinator->Status();
  ASSERT_EQ(s.accounting_size(), 1);
  EXPECT_EQ(s.accounting(0).samples_applied(), 10);
  EXPECT_EQ(s.accounting(0).samples_released(), 5);
  EXPECT_EQ(s.workers_seen(), 2);
}

TEST(CoordinatorTest, DeadWorkerIsEvictedAfterHeartbeatTimeout) {
  Fixture f(Job(4, 1), 8);
  const std::string a = f.Join();
  const int64_t gen = f.coordinator->Status().generation();
  f.clock.Advance(Fixture::kHeartbeatTimeout);  // not past the timeout yet
  f.coordinator->CheckTimeouts();
  ASSERT_TRUE(f.coordinator->Heartbeat(a).ok());
  f.clock.Advance(Fixture::kHeartbeatTimeout + absl::Milliseconds(1));
  f.coordinator->CheckTimeouts();
  EXPECT_EQ(f.coordinator->Heartbeat(a).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_GT(f.coordinator->Status().generation(), gen);
  EXPECT_EQ(Next(f, a).status().code(), absl::StatusCode::kNotFound);
}

TEST(CoordinatorTest, LongPollAnswersWaitOnceTheClockPassesItsDeadline) {
  Fixture f(Job(4, 1), 8, /*min_workers=*/2);
  const std::string a = f.Join();
  absl::Mutex mu;
  std::optional<absl::StatusOr<v1::NextTaskResponse>> reply;
  v1::NextTaskRequest request;
  request.set_worker_id(a);
  f.coordinator->NextTask(request, [&](absl::StatusOr<v1::NextTaskResponse> r) {
    absl::MutexLock lock(&mu);
    reply = std::move(r);
  });
  f.clock.Advance(absl::Milliseconds(49));
  f.coordinator->CheckTimeouts();
  {
    absl::MutexLock lock(&mu);
    EXPECT_FALSE(reply.has_value());  // parked: one worker of two
  }
  f.clock.Advance(absl::Milliseconds(1));
  f.coordinator->CheckTimeouts();
  absl::MutexLock lock(&mu);
  ASSERT_TRUE(reply.has_value());
  ASSERT_TRUE(reply->ok()) << reply->status();
  EXPECT_EQ((*reply)->action(), v1::NextTaskResponse::WAIT);
}

TEST(CoordinatorTest, ReportForAStepWithoutTheWorkerIsAborted) {
  Fixture f(Job(4, 1), 8);
  const std::string a = f.Join();
  v1::StepReport bogus;
  bogus.set_step(5);
  EXPECT_EQ(Next(f, a, &bogus).status().code(), absl::StatusCode::kAborted);
}

TEST(CoordinatorTest, WaitsBelowMinimumWorkers) {
  Fixture f(Job(4, 1), 8, /*min_workers=*/2);
  const std::string a = f.Join();
  auto r = Next(f, a);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->action(), v1::NextTaskResponse::WAIT);
}

TEST(CoordinatorTest, FinalizeIsRetriedWhenAShardIsDown) {
  Fixture f(Job(4, 1), 4);
  f.shards.fail_next = 2;
  const std::string a = f.Join();
  auto r = Next(f, a);
  auto d = Done(*r);
  auto finish = NextWork(f, a, &d);
  ASSERT_TRUE(finish.ok());
  EXPECT_EQ(finish->action(), v1::NextTaskResponse::FINISH);
  EXPECT_EQ(f.shards.finalized.size(), 1u);
}

TEST(CoordinatorTest, SspHoldsBackAWorkerTooFarAhead) {
  v1::JobSpec job = Job(4, 1, v1::CONSISTENCY_SSP);
  job.set_staleness(1);
  Fixture f(job, 1000, 2);
  const std::string fast = f.Join(), slow = f.Join();
  ASSERT_EQ(Next(f, slow)->action(), v1::NextTaskResponse::TRAIN);
  auto r = Next(f, fast);
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(r->action(), v1::NextTaskResponse::TRAIN) << "clock " << i;
    auto d = Done(*r);
    r = Next(f, fast, &d);
  }
  // fast has done 2 tasks, slow 0: 2 > 0 + 1, so fast must wait.
  EXPECT_EQ(r->action(), v1::NextTaskResponse::WAIT);
}

TEST(CoordinatorTest, RejectsOtherJobsAndBadSpecs) {
  Fixture f(Job(4, 1), 8);
  v1::RegisterRequest other;
  other.set_job_id("not-this-one");
  EXPECT_EQ(f.coordinator->Register(other).status().code(),
            absl::StatusCode::kFailedPrecondition);
  FakeShardControl shards;
  CoordinatorOptions bad;
  bad.job = Job(0, 1);
  bad.epoch_size = 8;
  EXPECT_EQ(Coordinator::Create(bad, &shards).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Ring mode's only seam: the members' weights at a version, evaluated.
class RecordingEvaluator final : public WeightsEvaluator {
 public:
  absl::StatusOr<TestScores> Evaluate(int64_t min_version) override {
    absl::MutexLock lock(&mu);
    versions.push_back(min_version);
    return TestScores{.accuracy = 0.25, .loss = 2.0};
  }
  absl::Mutex mu;
  std::vector<int64_t> versions;
};

TEST(CoordinatorTest, RingJobRunsOnAnEvaluatorAloneAndPsJobsRefuseOne) {
  RecordingEvaluator evaluator;
  CoordinatorOptions options;
  options.job = Job(4, 1);
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
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(lease.ok()) << lease.status();
    ASSERT_EQ(lease->action(), v1::NextTaskResponse::TRAIN);
    EXPECT_EQ(lease->step(), step);
    const v1::StepReport done = Done(*lease);
    lease = NextWork(polled, w, &done);
  }
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->action(), v1::NextTaskResponse::FINISH);
  ASSERT_TRUE((*c)->WaitUntilFinished(absl::Seconds(5)));
  const v1::StatusResponse s = (*c)->Status();
  ASSERT_EQ(s.evals_size(), 1);
  EXPECT_DOUBLE_EQ(s.evals(0).test_accuracy(), 0.25);
  {
    absl::MutexLock lock(&evaluator.mu);
    EXPECT_EQ(evaluator.versions, (std::vector<int64_t>{2}));
  }
  options.job.set_mode(v1::MODE_PS);
  EXPECT_EQ(Coordinator::Create(options, &evaluator).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CoordinatorTest, QuorumFinalizesWithoutTheStragglerAndReleasesItsSamples) {
  v1::JobSpec job = Job(10, 1);
  job.set_sync_quorum(1);
  Fixture f(job, 20, /*min_workers=*/2);
  const std::string fast = f.Join(), slow = f.Join();
  auto rf = Next(f, fast);
  auto rs = Next(f, slow);
  ASSERT_TRUE(rf.ok() && rs.ok());
  ASSERT_EQ(rs->tasks(0).begin(), 5);
  const v1::StepReport df = Done(*rf), ds = Done(*rs);
  auto next = NextWork(f, fast, &df);
  ASSERT_TRUE(next.ok());
  WaitForFinalize(f.shards);
  {
    absl::MutexLock lock(&f.shards.mu);
    ASSERT_EQ(f.shards.finalized.size(), 1u);
    ASSERT_EQ(f.shards.finalized[0].second.size(), 1u);
    EXPECT_EQ(f.shards.finalized[0].second[0].worker_id(), fast);
  }
  // The straggler's report for step 0 comes too late: ABORTED, not applied.
  EXPECT_EQ(Next(f, slow, &ds).status().code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(WaitForStatus(*f.coordinator, [](const v1::StatusResponse& s) {
    return s.samples_applied() == 5;
  })) << f.coordinator->Status().samples_applied();
}

}  // namespace
}  // namespace ferry

namespace ferry {
namespace {

absl::StatusOr<v1::NextTaskResponse> Prefetch(Polled c,
                                              const std::string& worker,
                                              int64_t after_step) {
  v1::NextTaskRequest request;
  request.set_worker_id(worker);
  request.set_after_step(after_step);
  return Call(c, request);
}

absl::StatusOr<v1::NextTaskResponse> ReportOnly(Polled c,
                                                const std::string& worker,
                                                const v1::StepReport& done) {
  v1::NextTaskRequest request;
  request.set_worker_id(worker);
  *request.mutable_done() = done;
  request.set_report_only(true);
  return Call(c, request);
}

TEST(CoordinatorTest, PrefetchFormsTheNextStepWhileThisOneRunsButNoFurther) {
  Fixture f(Job(10, 1), 100, /*min_workers=*/2);
  const std::string a = f.Join(), b = f.Join();
  auto a0 = Next(f, a);
  auto b0 = Next(f, b);
  ASSERT_TRUE(a0.ok() && b0.ok());
  ASSERT_EQ(a0->step(), 0);
  // Step 1 forms although nobody reported step 0; it takes the next positions.
  auto a1 = Prefetch(f, a, 0);
  ASSERT_TRUE(a1.ok()) << a1.status();
  ASSERT_EQ(a1->action(), v1::NextTaskResponse::TRAIN);
  EXPECT_EQ(a1->step(), 1);
  EXPECT_EQ(a1->tasks(0).begin(), 10);
  // Step 2 would be a third step collecting reports: the long-poll expires.
  auto a2 = Prefetch(f, a, 1);
  ASSERT_TRUE(a2.ok());
  EXPECT_EQ(a2->action(), v1::NextTaskResponse::WAIT);
  // Reports alone are answered at once; step 0 then finalizes with both.
  auto ack = ReportOnly(f, a, Done(*a0));
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->action(), v1::NextTaskResponse::WAIT);
  ASSERT_TRUE(ReportOnly(f, b, Done(*b0)).ok());
  WaitForFinalize(f.shards);
  {
    absl::MutexLock lock(&f.shards.mu);
    ASSERT_EQ(f.shards.finalized.size(), 1u);
    EXPECT_EQ(f.shards.finalized[0].first, 0);
    EXPECT_EQ(f.shards.finalized[0].second.size(), 2u);
  }
  auto a2_now = Prefetch(f, a, 1);
  ASSERT_TRUE(a2_now.ok());
  EXPECT_EQ(a2_now->action(), v1::NextTaskResponse::TRAIN);
  EXPECT_EQ(a2_now->step(), 2);
  EXPECT_EQ(a2_now->tasks(0).begin(), 20);
  // Without after_step a worker gets its oldest unreported step back.
  auto again = Next(f, b);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->step(), 1);
}

}  // namespace
}  // namespace ferry

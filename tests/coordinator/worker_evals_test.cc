// The evaluations a job's workers run (coordinator/worker_evals.h), alone and
// inside the coordinator: a job whose model is its workers' hands each epoch
// end and its end to one worker that evaluates, holds sync steps until the
// result is in, records it as the job's EvalPoint, and does not wait for a
// worker that is gone.
#include "coordinator/worker_evals.h"

#include <memory>
#include <string>

#include "coordinator/coordinator.h"
#include "coordinator/job_evaluators.h"
#include "coordinator/shard_control.h"
#include "gtest/gtest.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace ferry {
namespace {

v1::WorkerEvaluation Figures(const v1::EvalTask& task, double accuracy,
                             double loss) {
  v1::WorkerEvaluation e;
  e.set_version(task.version());
  e.set_epoch(task.epoch());
  e.set_final(task.final());
  e.set_accuracy(accuracy);
  e.set_loss(loss);
  e.set_duration_seconds(0.25);
  return e;
}

TEST(WorkerEvalsTest, EpochEndsGoOutOldestFirstThenTheFinal) {
  WorkerEvals evals;
  evals.QueueEpochEnd(10, 0);
  evals.QueueEpochEnd(20, 1);
  evals.QueueFinal(25, -1);
  const auto a = evals.ClaimNext("w0");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->version(), 10);
  EXPECT_EQ(evals.ClaimNext("w0")->version(), 10);  // asked again: the same
  const auto b = evals.ClaimNext("w1");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->version(), 20);
  const auto c = evals.ClaimNext("w2");
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(c->final());
  EXPECT_EQ(c->version(), 25);
  EXPECT_FALSE(evals.ClaimNext("w3").has_value());  // all are held
}

TEST(WorkerEvalsTest, OnlyTheHolderResolvesAndOnlyOnce) {
  WorkerEvals evals;
  evals.QueueEpochEnd(10, 0);
  const v1::EvalTask task = *evals.ClaimNext("w0");
  EXPECT_TRUE(
      absl::IsNotFound(evals.Resolve("w1", Figures(task, 0.5, 1.0)).status()));
  v1::WorkerEvaluation other_epoch = Figures(task, 0.5, 1.0);
  other_epoch.set_epoch(3);
  EXPECT_TRUE(absl::IsNotFound(evals.Resolve("w0", other_epoch).status()));
  const auto resolved = evals.Resolve("w0", Figures(task, 0.5, 1.0));
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->version(), 10);
  EXPECT_EQ(evals.pending_epoch_ends(), 0);
  EXPECT_TRUE(
      absl::IsNotFound(evals.Resolve("w0", Figures(task, 0.5, 1.0)).status()));
}

TEST(WorkerEvalsTest, BadFiguresAreRefusedAndChangeNothing) {
  WorkerEvals evals;
  evals.QueueEpochEnd(10, 0);
  const v1::EvalTask task = *evals.ClaimNext("w0");
  for (const auto& [accuracy, loss] :
       {std::pair{1.5, 1.0}, std::pair{-0.1, 1.0}, std::pair{std::nan(""), 1.0},
        std::pair{0.5, std::nan("")}, std::pair{0.5, HUGE_VAL}}) {
    EXPECT_TRUE(absl::IsInvalidArgument(
        evals.Resolve("w0", Figures(task, accuracy, loss)).status()))
        << accuracy << " " << loss;
  }
  v1::WorkerEvaluation negative_time = Figures(task, 0.5, 1.0);
  negative_time.set_duration_seconds(-1);
  EXPECT_TRUE(
      absl::IsInvalidArgument(evals.Resolve("w0", negative_time).status()));
  EXPECT_EQ(evals.pending_epoch_ends(), 1);
  EXPECT_TRUE(evals.Resolve("w0", Figures(task, 0.5, 1.0)).ok());
}

TEST(WorkerEvalsTest, WhatALeaverHeldGoesToAnotherAndAbandonCounts) {
  WorkerEvals evals;
  evals.QueueEpochEnd(10, 0);
  evals.QueueFinal(12, 0);
  ASSERT_EQ(evals.ClaimNext("w0")->version(), 10);
  ASSERT_TRUE(evals.ClaimNext("w1")->final());
  evals.Release("w0");
  const auto again = evals.ClaimNext("w2");
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->version(), 10);
  evals.AbandonAll();
  EXPECT_EQ(evals.abandoned(), 2);
  EXPECT_FALSE(evals.final_pending());
  EXPECT_FALSE(evals.ClaimNext("w2").has_value());
}

TEST(WorkerEvalsTest, SavedPendingEvaluationsComeBackUnclaimed) {
  WorkerEvals evals;
  evals.QueueEpochEnd(2, 0);
  evals.QueueEpochEnd(4, 1);
  evals.QueueFinal(6, 2);
  ASSERT_TRUE(evals.ClaimNext("w1").has_value());  // epoch 0, held by w1
  v1::CoordinatorState state;
  evals.SaveTo(state);
  ASSERT_EQ(state.worker_evals_size(), 3);
  EXPECT_TRUE(state.worker_evals(2).final());

  WorkerEvals restored;
  restored.LoadFrom(state);
  EXPECT_EQ(restored.pending_epoch_ends(), 2);
  EXPECT_TRUE(restored.final_pending());
  // What w1 held is anyone's now, still oldest first.
  auto task = restored.ClaimNext("w2");
  ASSERT_TRUE(task.has_value());
  EXPECT_EQ(task->version(), 2);
  EXPECT_EQ(task->epoch(), 0);
  // Nothing resolved twice: the report of the old holder is stale.
  EXPECT_TRUE(absl::IsNotFound(
      restored.Resolve("w1", Figures(*task, 0.5, 1.0)).status()));
  EXPECT_TRUE(restored.Resolve("w2", Figures(*task, 0.5, 1.0)).ok());
  EXPECT_EQ(restored.pending_epoch_ends(), 1);
}

// The weights of a job whose model is its workers' are not the
// coordinator's to score (what RingControl answers for such a job).
class NoScores final : public WeightsEvaluator {
 public:
  absl::StatusOr<TestScores> Evaluate(int64_t) override {
    return NoEvaluatorStatus();
  }
};

// A ring job of 2 epochs of 2 steps each (batch 4, 8 samples), whose model
// is its workers'.
struct WorkerEvalJob {
  WorkerEvalJob() {
    options.job = Job(4, 2);
    options.job.set_mode(v1::MODE_RING);
    options.job.set_model_from_worker(true);
    options.epoch_size = 8;
    options.long_poll = absl::Milliseconds(50);
    options.heartbeat_timeout = absl::Hours(1);
    options.clock = &clock;
    options.state_dir = "/state";
    options.file_system = &fs;
    auto c = Coordinator::Create(options, &scores);
    EXPECT_TRUE(c.ok()) << c.status();
    coordinator = *std::move(c);
  }
  // A new coordinator resumes from the saved state (the old one is gone).
  void Restart() {
    coordinator.reset();
    auto c = Coordinator::Create(options, &scores);
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator = *std::move(c);
  }
  std::string Join() {
    return coordinator->Register(v1::RegisterRequest())->worker_id();
  }
  // One NextTask call of `worker`, answered (long polls run on the clock).
  absl::StatusOr<v1::NextTaskResponse> Ask(
      const std::string& worker, bool evaluates,
      const v1::StepReport* done = nullptr,
      const v1::WorkerEvaluation* evaluation = nullptr,
      bool report_only = false) {
    v1::NextTaskRequest request;
    request.set_worker_id(worker);
    request.set_evaluates(evaluates);
    request.set_report_only(report_only);
    if (done != nullptr) *request.mutable_done() = *done;
    if (evaluation != nullptr) *request.mutable_evaluation() = *evaluation;
    return Call(Polled(*coordinator, &clock, options.long_poll), request);
  }

  FakeClock clock;
  InMemoryFileSystem fs;  // the coordinator's state_dir
  NoScores scores;
  CoordinatorOptions options;
  std::unique_ptr<Coordinator> coordinator;
};

// `w` reports the final evaluation `task` (accuracy 0.75, loss 0.5): it is
// told FINISH and the job ends. The job's status then.
v1::StatusResponse ReportFinal(WorkerEvalJob& job, const std::string& w,
                               const v1::EvalTask& task) {
  const v1::WorkerEvaluation figures = Figures(task, 0.75, 0.5);
  auto r = job.Ask(w, true, nullptr, &figures);
  EXPECT_TRUE(r.ok()) << r.status();
  if (r.ok()) {
    EXPECT_EQ(r->action(), v1::NextTaskResponse::FINISH);
  }
  EXPECT_TRUE(job.coordinator->WaitUntilFinished(absl::Seconds(5)));
  return job.coordinator->Status();
}

TEST(CoordinatorWorkerEvalTest, OneWorkerEvaluatesEachEpochEndAndTheEnd) {
  WorkerEvalJob job;
  const std::string w = job.Join();
  auto r = job.Ask(w, true);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->action(), v1::NextTaskResponse::TRAIN);
  v1::StepReport done = Done(*r);
  r = job.Ask(w, true, &done);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->step(), 1);
  done = Done(*r);
  // Epoch 0 ends at version 2: its evaluation comes before step 2.
  r = job.Ask(w, true, &done);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->action(), v1::NextTaskResponse::EVALUATE);
  EXPECT_EQ(r->evaluate().version(), 2);
  EXPECT_EQ(r->evaluate().epoch(), 0);
  EXPECT_FALSE(r->evaluate().final());
  // Asked again without a result (a lost answer): the same task.
  r = job.Ask(w, true);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->action(), v1::NextTaskResponse::EVALUATE);
  const v1::WorkerEvaluation figures = Figures(r->evaluate(), 0.25, 2.0);
  r = job.Ask(w, true, nullptr, &figures);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->action(), v1::NextTaskResponse::TRAIN);
  EXPECT_EQ(r->step(), 2);
  for (int step = 2; step < 4; ++step) {
    ASSERT_EQ(r->action(), v1::NextTaskResponse::TRAIN);
    done = Done(*r);
    r = job.Ask(w, true, &done);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  // The end: the final weights, then FINISH once the result is in.
  ASSERT_EQ(r->action(), v1::NextTaskResponse::EVALUATE);
  EXPECT_TRUE(r->evaluate().final());
  EXPECT_EQ(r->evaluate().version(), 4);
  EXPECT_EQ(r->evaluate().epoch(), 1);
  EXPECT_FALSE(job.coordinator->Status().finished());
  const v1::StatusResponse s = ReportFinal(job, w, r->evaluate());
  ASSERT_EQ(s.evals_size(), 2);
  EXPECT_EQ(s.evals(0).step(), 2);
  EXPECT_EQ(s.evals(0).epoch(), 0);
  EXPECT_DOUBLE_EQ(s.evals(0).test_accuracy(), 0.25);
  EXPECT_DOUBLE_EQ(s.evals(0).test_loss(), 2.0);
  EXPECT_DOUBLE_EQ(s.evals(0).duration_seconds(), 0.25);
  EXPECT_FALSE(s.evals(0).final());
  EXPECT_EQ(s.evals(1).step(), 4);
  EXPECT_TRUE(s.evals(1).final());
  EXPECT_DOUBLE_EQ(s.evals(1).test_accuracy(), 0.75);
  EXPECT_TRUE(s.final_eval_error().empty());
}

TEST(CoordinatorWorkerEvalTest,
     StepsWaitForTheEvaluationAndBadFiguresAreRefused) {
  WorkerEvalJob job;
  const std::string evaluator = job.Join();
  const std::string other = job.Join();
  // Two steps with both ring members (reports only: no lease is waited for).
  for (int step = 0; step < 2; ++step) {
    for (const std::string& w : {evaluator, other}) {
      auto r = job.Ask(w, w == evaluator);
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_EQ(r->action(), v1::NextTaskResponse::TRAIN) << w;
      ASSERT_EQ(r->step(), step);
      const v1::StepReport done = Done(*r);
      ASSERT_TRUE(job.Ask(w, w == evaluator, &done, nullptr, true).ok());
    }
    ASSERT_TRUE(WaitForStatus(
        *job.coordinator, [&](const auto& s) { return s.step() == step + 1; }));
  }
  // Epoch 0 ended: the member that does not evaluate waits (the ring's
  // long polls end in WAIT) while the other evaluates.
  auto r = job.Ask(other, false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->action(), v1::NextTaskResponse::WAIT);
  r = job.Ask(evaluator, true);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->action(), v1::NextTaskResponse::EVALUATE);
  const v1::EvalTask task = r->evaluate();
  v1::WorkerEvaluation bad = Figures(task, 1.5, 1.0);
  r = job.Ask(evaluator, true, nullptr, &bad);
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_EQ(job.coordinator->Status().evals_size(), 0);
  r = job.Ask(other, false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->action(), v1::NextTaskResponse::WAIT);
  const v1::WorkerEvaluation good = Figures(task, 0.5, 1.0);
  r = job.Ask(evaluator, true, nullptr, &good);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->action(), v1::NextTaskResponse::TRAIN);
  EXPECT_EQ(r->step(), 2);
  r = job.Ask(other, false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->action(), v1::NextTaskResponse::TRAIN);
  EXPECT_EQ(job.coordinator->Status().evals_size(), 1);
}

TEST(CoordinatorWorkerEvalTest, TheJobEndsWhenItsEvaluatorLeaves) {
  WorkerEvalJob job;
  const std::string evaluator = job.Join();
  const std::string other = job.Join();
  // Epoch 0's evaluation is resolved, then epoch 1 trains to the end.
  for (int step = 0; step < 4; ++step) {
    if (step == 2) {
      auto r = job.Ask(evaluator, true);
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_EQ(r->action(), v1::NextTaskResponse::EVALUATE);
      const v1::WorkerEvaluation figures = Figures(r->evaluate(), 0.5, 1.0);
      ASSERT_TRUE(job.Ask(evaluator, true, nullptr, &figures, true).ok());
    }
    for (const std::string& w : {evaluator, other}) {
      auto r = job.Ask(w, w == evaluator);
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_EQ(r->action(), v1::NextTaskResponse::TRAIN) << w << " " << step;
      const v1::StepReport done = Done(*r);
      ASSERT_TRUE(job.Ask(w, w == evaluator, &done, nullptr, true).ok());
    }
  }
  auto r = job.Ask(evaluator, true);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->action(), v1::NextTaskResponse::EVALUATE);
  ASSERT_TRUE(r->evaluate().final());
  EXPECT_FALSE(job.coordinator->Status().finished());
  // It leaves without a result: nobody else evaluates, the job ends.
  ASSERT_TRUE(job.coordinator->Leave(evaluator).ok());
  ASSERT_TRUE(job.coordinator->WaitUntilFinished(absl::Seconds(5)));
  r = job.Ask(other, false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->action(), v1::NextTaskResponse::FINISH);
  const v1::StatusResponse s = job.coordinator->Status();
  ASSERT_EQ(s.evals_size(), 1);
  EXPECT_FALSE(s.evals(0).final());
}

// A coordinator restarted while an epoch end's evaluation is held, and
// again once training is done, hands both out again: the job ends with
// every evaluation, not with "no test evaluation".
TEST(CoordinatorWorkerEvalTest, EvaluationsInFlightSurviveACoordinatorRestart) {
  WorkerEvalJob job;
  const std::string w = job.Join();
  auto r = job.Ask(w, true);
  ASSERT_TRUE(r.ok()) << r.status();
  for (int step = 0; step < 2; ++step) {
    ASSERT_EQ(r->action(), v1::NextTaskResponse::TRAIN);
    const v1::StepReport done = Done(*r);
    r = job.Ask(w, true, &done);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  ASSERT_EQ(r->action(), v1::NextTaskResponse::EVALUATE);
  ASSERT_EQ(r->evaluate().version(), 2);
  job.Restart();
  // The worker's next call (the same member, kept in the state) gets the
  // same evaluation; steps still wait for it.
  r = job.Ask(w, true);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->action(), v1::NextTaskResponse::EVALUATE);
  EXPECT_EQ(r->evaluate().version(), 2);
  EXPECT_EQ(r->evaluate().epoch(), 0);
  const v1::WorkerEvaluation figures = Figures(r->evaluate(), 0.25, 2.0);
  r = job.Ask(w, true, nullptr, &figures);
  ASSERT_TRUE(r.ok()) << r.status();
  for (int step = 2; step < 4; ++step) {
    ASSERT_EQ(r->action(), v1::NextTaskResponse::TRAIN);
    EXPECT_EQ(r->step(), step);
    const v1::StepReport done = Done(*r);
    r = job.Ask(w, true, &done);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  ASSERT_EQ(r->action(), v1::NextTaskResponse::EVALUATE);
  ASSERT_TRUE(r->evaluate().final());
  job.Restart();  // training done, its final evaluation held
  r = job.Ask(w, true);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->action(), v1::NextTaskResponse::EVALUATE);
  EXPECT_TRUE(r->evaluate().final());
  EXPECT_EQ(r->evaluate().version(), 4);
  const v1::StatusResponse s = ReportFinal(job, w, r->evaluate());
  ASSERT_EQ(s.evals_size(), 2);
  EXPECT_EQ(s.evals(0).step(), 2);
  EXPECT_DOUBLE_EQ(s.evals(0).test_accuracy(), 0.25);
  EXPECT_TRUE(s.evals(1).final());
  EXPECT_DOUBLE_EQ(s.evals(1).test_accuracy(), 0.75);
}

}  // namespace
}  // namespace ferry

// The coordinator's training curves, through a fake MetricsSink.
#include <cmath>
#include <future>
#include <utility>
#include <vector>

#include "coordinator/coordinator.h"
#include "gtest/gtest.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace ferry {
namespace {

class FakeSink : public MetricsSink {
 public:
  void RecordStep(const StepMetrics& m) override {
    absl::MutexLock lock(&mu);
    steps.push_back(m);
  }
  void RecordEval(const EvalMetrics& m) override {
    absl::MutexLock lock(&mu);
    evals.push_back(m);
  }
  absl::Mutex mu;
  std::vector<StepMetrics> steps;
  std::vector<EvalMetrics> evals;
};

// A report like Done() with accuracy, timing and cumulative byte counts.
v1::StepReport Report(const v1::NextTaskResponse& r, int64_t cumulative_sent) {
  v1::StepReport report = Done(r);
  report.set_correct(report.num_samples() / 2);
  report.set_compute_seconds(0.25);
  report.set_comm_seconds(0.5);
  (*report.mutable_bytes()->mutable_sent())["ps"] = cumulative_sent;
  (*report.mutable_bytes()->mutable_received())["ps"] = 2 * cumulative_sent;
  return report;
}

// The fixture's coordinator again, with `sink` injected.
void UseSink(Fixture& f, FakeSink& sink) {
  f.coordinator->Shutdown();
  f.options.metrics = &sink;
  f.coordinator = *f.Restart();
}

TEST(CoordinatorMetricsTest, OnePointPerCommittedStepWithItsAggregate) {
  Fixture f(Job(8, 2), 21);
  FakeSink sink;
  UseSink(f, sink);
  const std::string a = f.Join(), b = f.Join();
  auto ra = Next(f, a);
  auto rb = Next(f, b);
  int64_t reports = 0;
  for (int guard = 0; guard < 200; ++guard) {
    ASSERT_TRUE(ra.ok() && rb.ok()) << ra.status() << rb.status();
    if (ra->action() == v1::NextTaskResponse::FINISH &&
        rb->action() == v1::NextTaskResponse::FINISH) {
      break;
    }
    ++reports;
    const v1::StepReport da = Report(*ra, 100 * reports),
                         db = Report(*rb, 1000 * reports);
    const bool a_task = ra->action() == v1::NextTaskResponse::TRAIN;
    const bool b_task = rb->action() == v1::NextTaskResponse::TRAIN;
    std::future<absl::StatusOr<v1::NextTaskResponse>> fa = std::async(
        std::launch::async,
        [&] { return a_task ? NextWork(f, a, &da) : NextWork(f, a); });
    rb = b_task ? NextWork(f, b, &db) : NextWork(f, b);
    ra = fa.get();
  }
  ASSERT_TRUE(f.coordinator->WaitUntilFinished(absl::Seconds(5)));
  f.coordinator->Shutdown();  // flushes what is left
  absl::MutexLock lock(&sink.mu);
  // 21 samples / batch 8 = 3 steps per epoch (8, 8, 5), two epochs.
  ASSERT_EQ(sink.steps.size(), 6u);
  const int64_t expected_samples[] = {8, 8, 5, 8, 8, 5};
  int64_t last_sent = 0;
  for (size_t i = 0; i < sink.steps.size(); ++i) {
    const StepMetrics& m = sink.steps[i];
    EXPECT_EQ(m.step, static_cast<int64_t>(i) + 1);
    EXPECT_EQ(m.epoch, static_cast<int64_t>(i) / 3);
    EXPECT_EQ(m.samples, expected_samples[i]);
    EXPECT_EQ(m.workers, 2);
    EXPECT_EQ(m.mode, "ps");
    EXPECT_DOUBLE_EQ(m.train_loss, 0.5);  // Done(): loss_sum = n * 0.5
    EXPECT_GT(m.train_accuracy, 0.0);
    EXPECT_LE(m.train_accuracy, 0.5);
    EXPECT_DOUBLE_EQ(m.compute_seconds, 0.25);
    EXPECT_DOUBLE_EQ(m.comm_seconds, 0.5);
    EXPECT_GE(m.step_seconds, 0.0);
    EXPECT_GE(m.elapsed_seconds, 0.0);
    EXPECT_EQ(m.bytes_workers, 2);
    EXPECT_GE(m.bytes_sent, last_sent);  // cumulative
    EXPECT_EQ(m.bytes_received, 2 * m.bytes_sent);
    last_sent = m.bytes_sent;
  }
  // The last step's counts are both workers' latest reports.
  EXPECT_EQ(sink.steps.back().bytes_sent, 1100 * reports);
  ASSERT_EQ(sink.evals.size(), 2u);  // after epoch 0, and the final one
  EXPECT_EQ(sink.evals[0].step, 3);
  EXPECT_EQ(sink.evals[0].epoch, 0);
  EXPECT_FALSE(sink.evals[0].final);
  EXPECT_EQ(sink.evals[1].step, 6);
  EXPECT_TRUE(sink.evals[1].final);
  EXPECT_DOUBLE_EQ(sink.evals[1].test_accuracy,
                   0.5);  // FakeShardControl::Evaluate
  EXPECT_DOUBLE_EQ(sink.evals[1].test_loss, 1.0);
}

TEST(CoordinatorMetricsTest, AsyncGetsOnePointPerAppliedTask) {
  Fixture f(Job(8, 1, v1::CONSISTENCY_ASYNC), 16);
  FakeSink sink;
  UseSink(f, sink);
  const std::string a = f.Join();
  auto r = Next(f, a);
  int tasks = 0;
  while (r.ok() && r->action() == v1::NextTaskResponse::TRAIN && tasks < 10) {
    ++tasks;
    const v1::StepReport done = Report(*r, 10 * tasks);
    r = NextWork(f, a, &done);
  }
  ASSERT_TRUE(f.coordinator->WaitUntilFinished(absl::Seconds(5)));
  f.coordinator->Shutdown();
  absl::MutexLock lock(&sink.mu);
  ASSERT_EQ(sink.steps.size(), static_cast<size_t>(tasks));
  for (size_t i = 0; i < sink.steps.size(); ++i) {
    EXPECT_EQ(sink.steps[i].step, static_cast<int64_t>(i) + 1);
    EXPECT_EQ(sink.steps[i].workers, 1);
    EXPECT_EQ(sink.steps[i].bytes_sent, 10 * static_cast<int64_t>(i + 1));
  }
  ASSERT_EQ(sink.evals.size(), 1u);
  EXPECT_EQ(sink.evals[0].step, tasks);
}

// Step times and throughput come from the workers' clocks: the reports
// here reach the coordinator whenever its (fake) clock says, as a lagging
// coordinator's commits bunch, while the steps' own readings are 100 ms
// apart. The window, the status and the curves follow the readings.
TEST(CoordinatorMetricsTest, StepTimesAreTheWorkersClocksNotTheArrivals) {
  Fixture f(Job(8, 1, v1::CONSISTENCY_ASYNC), 40);
  FakeSink sink;
  UseSink(f, sink);
  const std::string a = f.Join();
  const double base = absl::ToDoubleSeconds(f.clock.Now() - absl::UnixEpoch());
  auto r = Next(f, a);
  int tasks = 0;
  while (r.ok() && r->action() == v1::NextTaskResponse::TRAIN) {
    v1::StepReport done = Report(*r, 10 * (tasks + 1));
    done.set_began_unix_seconds(base + 1 + 0.1 * tasks);
    done.set_exchanged_unix_seconds(base + 1.08 + 0.1 * tasks);
    done.set_compute_seconds(0.05);
    done.set_comm_seconds(0.03);
    ++tasks;
    r = NextWork(f, a, &done);
  }
  ASSERT_EQ(tasks, 5);  // 40 samples, tasks of 8
  ASSERT_TRUE(f.coordinator->WaitUntilFinished(absl::Seconds(5)));
  const v1::StatusResponse s = f.coordinator->Status();
  EXPECT_EQ(s.window_steps(), 4);
  EXPECT_EQ(s.window_samples(), 32);
  EXPECT_NEAR(s.window_seconds(), 0.4, 1e-6);
  EXPECT_NEAR(s.samples_per_second(), 80.0, 1e-3);
  EXPECT_NEAR(s.step_seconds(), 0.1, 1e-6);
  EXPECT_NEAR(s.startup_seconds(), 1.08, 1e-6);
  EXPECT_EQ(s.window_reports(), 4);
  EXPECT_NEAR(s.window_compute_seconds(), 0.2, 1e-9);
  EXPECT_NEAR(s.window_comm_seconds(), 0.12, 1e-9);
  EXPECT_NEAR(s.window_work_seconds(), 0.48, 1e-6);  // from the first began
  f.coordinator->Shutdown();
  absl::MutexLock lock(&sink.mu);
  ASSERT_EQ(sink.steps.size(), 5u);
  for (size_t i = 0; i < sink.steps.size(); ++i) {
    EXPECT_NEAR(sink.steps[i].ended_seconds, 1.08 + 0.1 * i, 1e-6);
    EXPECT_NEAR(sink.steps[i].began_seconds, 1 + 0.1 * i, 1e-6);
    // The first from its own beginning, then from the previous end (the
    // 20 ms between a report and the next lease count).
    EXPECT_NEAR(sink.steps[i].step_seconds, i == 0 ? 0.08 : 0.1, 1e-6);
  }
}

// Readings no clock gives are refused, and nothing of the report counts.
TEST(CoordinatorMetricsTest, ImpossibleStepTimesAreRefused) {
  Fixture f(Job(8, 1, v1::CONSISTENCY_ASYNC), 16);
  const std::string a = f.Join();
  auto r = Next(f, a);
  ASSERT_TRUE(r.ok() && r->action() == v1::NextTaskResponse::TRAIN);
  const double base = absl::ToDoubleSeconds(f.clock.Now() - absl::UnixEpoch());
  for (const auto& [began, exchanged] :
       std::vector<std::pair<double, double>>{{base + 2, base + 1},
                                              {std::nan(""), base},
                                              {base, -1.0},
                                              {base, HUGE_VAL}}) {
    v1::StepReport done = Report(*r, 10);
    done.set_began_unix_seconds(began);
    done.set_exchanged_unix_seconds(exchanged);
    auto refused = Next(f, a, &done);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument)
        << began << " " << exchanged;
    EXPECT_NE(refused.status().message().find("step times are impossible"),
              std::string::npos);
  }
  v1::StepReport negative_compute = Report(*r, 10);
  negative_compute.set_compute_seconds(-0.5);
  EXPECT_EQ(Next(f, a, &negative_compute).status().code(),
            absl::StatusCode::kInvalidArgument);
  const v1::StatusResponse s = f.coordinator->Status();
  EXPECT_EQ(s.step(), 0);
  EXPECT_EQ(s.samples_applied(), 0);
  EXPECT_EQ(s.window_steps(), 0);
}

// A CTR model's evaluation carries its AUC into the job's status and the
// curves; a dense model's has none.
TEST(CoordinatorMetricsTest, AnAucReachesTheStatusAndTheCurves) {
  for (const bool ctr : {false, true}) {
    Fixture f(Job(8, 1), 8);
    FakeSink sink;
    {
      absl::MutexLock lock(&f.shards.mu);
      if (ctr) f.shards.scores = {.accuracy = 0.75, .loss = 0.4, .auc = 0.8};
    }
    UseSink(f, sink);
    const std::string a = f.Join();
    auto r = Next(f, a);
    ASSERT_TRUE(r.ok()) << r.status();
    const v1::StepReport done = Done(*r);
    ASSERT_TRUE(NextWork(f, a, &done).ok());
    ASSERT_TRUE(f.coordinator->WaitUntilFinished(absl::Seconds(5)));
    const v1::StatusResponse s = f.coordinator->Status();
    f.coordinator->Shutdown();
    ASSERT_EQ(s.evals_size(), 1) << ctr;
    EXPECT_EQ(s.evals(0).has_test_auc(), ctr);
    absl::MutexLock lock(&sink.mu);
    ASSERT_EQ(sink.evals.size(), 1u) << ctr;
    EXPECT_EQ(sink.evals[0].test_auc.has_value(), ctr);
    if (ctr) {
      EXPECT_DOUBLE_EQ(s.evals(0).test_auc(), 0.8);
      EXPECT_DOUBLE_EQ(s.evals(0).test_loss(), 0.4);
      EXPECT_DOUBLE_EQ(s.evals(0).test_accuracy(), 0.75);
      EXPECT_DOUBLE_EQ(*sink.evals[0].test_auc, 0.8);
      EXPECT_DOUBLE_EQ(sink.evals[0].test_loss, 0.4);
    }
  }
}

TEST(CoordinatorMetricsTest, NoSinkNoPoints) {
  Fixture f(Job(8, 1), 8);  // metrics == nullptr: nothing queued, no crash
  const std::string a = f.Join();
  auto r = Next(f, a);
  ASSERT_TRUE(r.ok());
  const v1::StepReport done = Done(*r);
  ASSERT_TRUE(NextWork(f, a, &done).ok());
  EXPECT_TRUE(f.coordinator->WaitUntilFinished(absl::Seconds(5)));
}

}  // namespace
}  // namespace ferry

// JobProgress on its own: what a report adds, the pipeline figures'
// checks, rollbacks, and what status and the state file get.
#include "coordinator/job_progress.h"

#include <limits>

#include "gtest/gtest.h"

namespace ferry {
namespace {

v1::StepReport Report(int64_t samples, double loss_sum) {
  v1::StepReport r;
  r.set_num_samples(samples);
  r.set_loss_sum(loss_sum);
  r.set_compute_seconds(0.5);
  r.set_comm_seconds(0.25);
  r.set_unique_ids(7);
  return r;
}

v1::PipelineStepFigures Stage(int stage, int stages) {
  v1::PipelineStepFigures f;
  f.set_stage(stage);
  f.set_stages(stages);
  f.set_busy_seconds(1);
  f.set_wait_seconds(0.5);
  f.set_step_seconds(2);
  f.set_activation_bytes(100);
  f.set_neighbour_bytes_sent(10);
  f.set_neighbour_bytes_received(20);
  return f;
}

// A step that ended at `ended` with `samples`, reported by one worker.
TimedStep Timed(absl::Time ended, int64_t samples) {
  TimedStep t;
  t.ended = ended;
  t.samples = samples;
  t.reports = 1;
  return t;
}

v1::StatusResponse StatusOf(const JobProgress& p, double start_unix = 0) {
  v1::StatusResponse s;
  p.FillStatus(s, start_unix);
  return s;
}

TEST(CoordinatorJobProgressTest, ReportsAddTimesIdsAndTheRecentLoss) {
  JobProgress p(1);
  ASSERT_TRUE(p.AddReport(Report(10, 20)).ok());  // loss 2: the first
  ASSERT_TRUE(p.AddReport(Report(10, 10)).ok());  // loss 1: 0.9*2 + 0.1*1
  v1::StepReport failed = Report(10, 1000);
  failed.set_failed(true);  // its loss does not count, its times do
  ASSERT_TRUE(p.AddReport(failed).ok());
  ASSERT_TRUE(p.AddReport(Report(0, 0)).ok());  // no samples: no loss
  const v1::StatusResponse s = StatusOf(p);
  EXPECT_DOUBLE_EQ(s.train_loss(), 1.9);
  EXPECT_DOUBLE_EQ(s.compute_seconds(), 2.0);
  EXPECT_DOUBLE_EQ(s.comm_seconds(), 1.0);
  EXPECT_EQ(s.unique_ids(), 28);
}

TEST(CoordinatorJobProgressTest, PipelineFiguresSumPerRoleStagesFirst) {
  JobProgress p(2);
  v1::StepReport r = Report(4, 4);
  *r.mutable_pipeline() = Stage(0, 1);  // the whole model alone
  ASSERT_TRUE(p.AddReport(r).ok());
  *r.mutable_pipeline() = Stage(1, 2);
  ASSERT_TRUE(p.AddReport(r).ok());
  r.mutable_pipeline()->set_activation_bytes(300);
  ASSERT_TRUE(p.AddReport(r).ok());
  const v1::StatusResponse s = StatusOf(p);
  ASSERT_EQ(s.pipeline_size(), 2);
  EXPECT_EQ(s.pipeline(0).role(), "stage 1 of 2");
  EXPECT_EQ(s.pipeline(0).steps(), 2);
  EXPECT_DOUBLE_EQ(s.pipeline(0).busy_seconds(), 2);
  EXPECT_EQ(s.pipeline(0).peak_activation_bytes(), 300);
  EXPECT_EQ(s.pipeline(0).neighbour_bytes_received(), 40);
  EXPECT_EQ(s.pipeline(1).role(), "alone");
  EXPECT_EQ(s.pipeline(1).steps(), 1);
}

TEST(CoordinatorJobProgressTest, RefusesPipelineFiguresOfAnotherJob) {
  JobProgress p(2);
  v1::PipelineStepFigures nan_wait = Stage(0, 2);
  nan_wait.set_wait_seconds(std::numeric_limits<double>::quiet_NaN());
  v1::PipelineStepFigures negative_bytes = Stage(0, 2);
  negative_bytes.set_activation_bytes(-1);
  for (const v1::PipelineStepFigures& bad :
       {Stage(0, 3), Stage(2, 2), Stage(-1, 2), nan_wait, negative_bytes}) {
    v1::StepReport r = Report(4, 4);
    *r.mutable_pipeline() = bad;
    EXPECT_EQ(p.AddReport(r).code(), absl::StatusCode::kInvalidArgument)
        << bad.ShortDebugString();
  }
  // Nothing of a refused report was added.
  const v1::StatusResponse s = StatusOf(p);
  EXPECT_EQ(s.pipeline_size(), 0);
  EXPECT_EQ(s.compute_seconds(), 0);
  EXPECT_EQ(s.train_loss(), 0);
}

TEST(CoordinatorJobProgressTest, DigestsBytesAndAppliedSamples) {
  JobProgress p(1);
  p.CountDigest(true);
  p.CountDigest(false);
  p.CountBytes("worker", 10, 20);
  p.CountBytes("worker", 1, 2);
  p.CountBytes("shard", 5, 0);
  p.AddApplied(64);
  p.AddApplied(32);
  EXPECT_EQ(p.samples_applied(), 96);
  EXPECT_EQ(p.own_bytes().sent().at("worker"), 11);
  EXPECT_EQ(p.own_bytes().received().at("worker"), 22);
  const v1::StatusResponse s = StatusOf(p);
  EXPECT_EQ(s.digest_checks(), 2);
  EXPECT_EQ(s.digest_mismatches(), 1);
  EXPECT_EQ(s.samples_applied(), 96);
  EXPECT_EQ(s.coordinator_bytes().sent().at("shard"), 5);
}

TEST(CoordinatorJobProgressTest, TheWindowTimesStepsAndRollbacksTakeBack) {
  JobProgress p(1);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  // The job started 4 s before the first step ended.
  p.AddApplied(10);
  p.AddTimed(Timed(t0, 10));
  p.AddApplied(10);
  p.AddTimed(Timed(t0 + absl::Seconds(2), 10));
  p.AddApplied(10);
  p.AddTimed(Timed(t0 + absl::Seconds(4), 10));
  v1::StatusResponse s = StatusOf(p, 996);
  EXPECT_DOUBLE_EQ(s.startup_seconds(), 4);
  EXPECT_DOUBLE_EQ(s.window_seconds(), 4);
  EXPECT_EQ(s.window_samples(), 20);
  EXPECT_EQ(s.window_steps(), 2);
  EXPECT_DOUBLE_EQ(s.samples_per_second(), 5);
  p.TakeBack(10);  // the last step was undone
  EXPECT_EQ(p.samples_applied(), 20);
  s = StatusOf(p, 996);
  EXPECT_EQ(s.window_samples(), 10);
}

TEST(CoordinatorJobProgressTest, StateKeepsTotalsAndWindowNotLossOrBytes) {
  JobProgress p(2);
  v1::StepReport r = Report(10, 20);
  *r.mutable_pipeline() = Stage(1, 2);
  ASSERT_TRUE(p.AddReport(r).ok());
  p.CountDigest(false);
  p.CountBytes("worker", 1, 1);
  p.AddApplied(10);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  p.AddTimed(Timed(t0, 10));
  p.AddTimed(Timed(t0 + absl::Seconds(1), 10));
  v1::CoordinatorState state;
  p.SaveTo(state);
  JobProgress loaded(2);
  loaded.LoadFrom(state);
  const v1::StatusResponse before = StatusOf(p);
  const v1::StatusResponse after = StatusOf(loaded);
  EXPECT_EQ(after.samples_applied(), 10);
  EXPECT_EQ(after.compute_seconds(), before.compute_seconds());
  EXPECT_EQ(after.comm_seconds(), before.comm_seconds());
  EXPECT_EQ(after.unique_ids(), before.unique_ids());
  EXPECT_EQ(after.digest_mismatches(), 1);
  ASSERT_EQ(after.pipeline_size(), 1);
  EXPECT_EQ(after.pipeline(0).role(), "stage 1 of 2");
  EXPECT_EQ(after.window_samples(), before.window_samples());
  EXPECT_DOUBLE_EQ(after.window_seconds(), before.window_seconds());
  EXPECT_EQ(after.train_loss(), 0);
  EXPECT_TRUE(after.coordinator_bytes().sent().empty());
}

}  // namespace
}  // namespace ferry

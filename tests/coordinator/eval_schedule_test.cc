// EvalSchedule on its own: the order evaluations run in, the steps an
// epoch end holds, the job's end, and what status and the state file get.
#include "coordinator/eval_schedule.h"

#include "gtest/gtest.h"

namespace ferry {
namespace {

v1::EvalPoint Point(int64_t step, bool final, double duration) {
  v1::EvalPoint p;
  p.set_step(step);
  p.set_final(final);
  p.set_duration_seconds(duration);
  return p;
}

TEST(CoordinatorEvalScheduleTest, EpochEndsRunInOrderAndHoldSteps) {
  EvalSchedule evals;
  EXPECT_FALSE(evals.pending());
  evals.QueueEpochEnd(10, 0, /*hold_steps=*/false);  // async: nothing held
  EXPECT_FALSE(evals.steps_held());
  evals.QueueEpochEnd(20, 1, /*hold_steps=*/true);
  EXPECT_TRUE(evals.steps_held());
  ASSERT_TRUE(evals.pending());
  const EvalRequest first = evals.Pop();
  EXPECT_EQ(first.version, 10);
  EXPECT_EQ(first.epoch, 0);
  EXPECT_FALSE(first.holds_steps);
  EXPECT_FALSE(first.final);
  const EvalRequest second = evals.Pop();
  EXPECT_EQ(second.version, 20);
  EXPECT_TRUE(second.holds_steps);
  EXPECT_FALSE(evals.pending());
  EXPECT_TRUE(evals.ReleaseSteps());
  EXPECT_FALSE(evals.steps_held());
  EXPECT_FALSE(evals.ReleaseSteps());  // released once
}

TEST(CoordinatorEvalScheduleTest, TrainingEndsOnceWithOneFinalEvaluation) {
  EvalSchedule evals;
  EXPECT_TRUE(evals.EndTraining(30, -1));
  EXPECT_TRUE(evals.training_done());
  EXPECT_FALSE(evals.EndTraining(31, 2));
  const EvalRequest last = evals.Pop();
  EXPECT_TRUE(last.final);
  EXPECT_EQ(last.version, 30);
  EXPECT_EQ(last.epoch, -1);
  EXPECT_FALSE(evals.pending());
  EXPECT_FALSE(evals.finished());
  EXPECT_FALSE(evals.finish_time().has_value());
  evals.Finish(absl::FromUnixSeconds(50));
  EXPECT_TRUE(evals.finished());
  EXPECT_EQ(evals.finish_time(), absl::FromUnixSeconds(50));
}

TEST(CoordinatorEvalScheduleTest, AFailedFinalEvaluationIsReportedNotHidden) {
  EvalSchedule evals;
  evals.AddResult(Point(10, false, 1.5));  // an epoch's end, scored
  evals.EndTraining(20, -1);
  evals.Pop();
  evals.Finish(absl::FromUnixSeconds(60),
               absl::UnavailableError("no ring member serves step 20"));
  v1::StatusResponse status;
  evals.FillStatus(status);
  EXPECT_TRUE(status.finished());
  EXPECT_EQ(status.final_eval_error(),
            "UNAVAILABLE: no ring member serves step 20");
  // The earlier score stays, and is not taken for the final one.
  ASSERT_EQ(status.evals_size(), 1);
  EXPECT_FALSE(status.evals(0).final());

  EvalSchedule fine;
  fine.EndTraining(5, -1);
  fine.Finish(absl::FromUnixSeconds(7));
  v1::StatusResponse ok;
  fine.FillStatus(ok);
  EXPECT_EQ(ok.final_eval_error(), "");
}

TEST(CoordinatorEvalScheduleTest, StatusAndStateHoldTheResults) {
  EvalSchedule evals;
  evals.AddResult(Point(10, false, 1.5));
  evals.AddResult(Point(20, true, 2.5));
  evals.EndTraining(20, 1);
  v1::StatusResponse status;
  evals.FillStatus(status);
  ASSERT_EQ(status.evals_size(), 2);
  EXPECT_EQ(status.evals(0).step(), 10);
  EXPECT_EQ(status.eval_seconds(), 2.5);  // the final evaluation's
  EXPECT_TRUE(status.training_done());
  EXPECT_FALSE(status.finished());

  v1::CoordinatorState state;
  evals.SaveTo(state);
  EXPECT_TRUE(state.training_done());
  EXPECT_EQ(state.final_eval_seconds(), 2.5);
  EvalSchedule loaded;
  loaded.LoadFrom(state);
  ASSERT_EQ(loaded.results().size(), 2u);
  EXPECT_EQ(loaded.results()[1].step(), 20);
  EXPECT_FALSE(loaded.training_done());  // the caller ends it again
  v1::StatusResponse loaded_status;
  loaded.FillStatus(loaded_status);
  EXPECT_EQ(loaded_status.eval_seconds(), 2.5);
}

}  // namespace
}  // namespace ferry

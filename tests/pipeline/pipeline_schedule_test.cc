#include "pipeline/pipeline_schedule.h"

#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

using Op = PipelineOp;
constexpr Op::Kind F = Op::kForward;
constexpr Op::Kind B = Op::kBackward;

TEST(PipelineScheduleTest, GPipeForwardsEverythingThenBackwards) {
  EXPECT_EQ(StageOps(PipelineSchedule::kGPipe, 2, 0, 3),
            (std::vector<Op>{{F, 0}, {F, 1}, {F, 2}, {B, 2}, {B, 1}, {B, 0}}));
}

TEST(PipelineScheduleTest, OneForwardOneBackwardAfterTheWarmUp) {
  EXPECT_EQ(
      StageOps(PipelineSchedule::k1F1B, 2, 0, 4),
      (std::vector<Op>{
          {F, 0}, {F, 1}, {B, 0}, {F, 2}, {B, 1}, {F, 3}, {B, 2}, {B, 3}}));
  EXPECT_EQ(StageOps(PipelineSchedule::k1F1B, 2, 1, 3),
            (std::vector<Op>{{F, 0}, {B, 0}, {F, 1}, {B, 1}, {F, 2}, {B, 2}}));
  // More stages than micro-batches: all forwards first.
  EXPECT_EQ(StageOps(PipelineSchedule::k1F1B, 4, 0, 2),
            (std::vector<Op>{{F, 0}, {F, 1}, {B, 0}, {B, 1}}));
}

TEST(PipelineScheduleTest, EveryMicroBatchRunsOnceEachWayInOrder) {
  for (PipelineSchedule schedule :
       {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B}) {
    for (int stages = 1; stages <= 6; ++stages) {
      for (int micro = 1; micro <= 9; ++micro) {
        for (int s = 0; s < stages; ++s) {
          std::vector<int> forwarded(micro, 0), backwarded(micro, 0);
          for (const Op& op : StageOps(schedule, stages, s, micro)) {
            if (op.kind == F) {
              ++forwarded[op.micro_batch];
            } else {
              EXPECT_EQ(forwarded[op.micro_batch], 1);
              ++backwarded[op.micro_batch];
            }
          }
          EXPECT_EQ(forwarded, std::vector<int>(micro, 1));
          EXPECT_EQ(backwarded, std::vector<int>(micro, 1));
          const int peak = PeakMicroBatchesInFlight(schedule, stages, s, micro);
          EXPECT_EQ(peak, schedule == PipelineSchedule::kGPipe
                              ? micro
                              : std::min(stages - s, micro));
        }
      }
    }
  }
}

// Equal stages: the simulated step is M + P - 1 slots of forward + backward,
// and the idle share is the textbook bubble, for both schedules.
TEST(PipelineScheduleTest, SimulatedBubbleIsTheTextbookOneForEqualStages) {
  for (PipelineSchedule schedule :
       {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B}) {
    for (int stages = 1; stages <= 5; ++stages) {
      for (int micro = 1; micro <= 8; ++micro) {
        const std::vector<double> f(stages, 1.0), b(stages, 2.0);
        auto t = SimulatePipeline(schedule, micro, f, b, 0.0);
        ASSERT_TRUE(t.ok()) << t.status();
        EXPECT_DOUBLE_EQ(t->step_seconds, 3.0 * (micro + stages - 1))
            << PipelineScheduleName(schedule) << " P=" << stages
            << " M=" << micro;
        EXPECT_NEAR(t->bubble, PredictedBubble(stages, micro), 1e-12);
        for (int s = 0; s < stages; ++s) {
          EXPECT_DOUBLE_EQ(t->busy_seconds[s], 3.0 * micro);
        }
      }
    }
  }
}

// Stages on one device (two stages on one GPU) run one op at a time: the
// step is the sum of their ops and each idles 1 - 1/P of it, however the
// work is split; on devices of their own they overlap as before.
TEST(PipelineScheduleTest, StagesSharingADeviceRunOneOpAtATime) {
  for (PipelineSchedule schedule :
       {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B}) {
    auto shared = SimulatePipeline(schedule, 4, {1.0, 0.5}, {2.0, 1.0}, 0.0,
                                   std::vector<int>{0, 0});
    ASSERT_TRUE(shared.ok()) << shared.status();
    EXPECT_DOUBLE_EQ(shared->step_seconds, 4 * 3.0 + 4 * 1.5);
    EXPECT_NEAR(shared->bubble, 0.5, 1e-12);
    auto own = SimulatePipeline(schedule, 4, {1.0, 0.5}, {2.0, 1.0}, 0.0,
                                std::vector<int>{0, 1});
    auto none = SimulatePipeline(schedule, 4, {1.0, 0.5}, {2.0, 1.0}, 0.0);
    ASSERT_TRUE(own.ok() && none.ok());
    EXPECT_DOUBLE_EQ(own->step_seconds, none->step_seconds);
    EXPECT_LT(own->step_seconds, shared->step_seconds);
    // Three stages, the first two on one device.
    auto mixed = SimulatePipeline(schedule, 4, {1.0, 1.0, 1.0}, {1.0, 1.0, 1.0},
                                  0.0, std::vector<int>{7, 7, 8});
    ASSERT_TRUE(mixed.ok());
    EXPECT_GE(mixed->step_seconds, 16.0);  // stages 0 and 1: 8 ops of 2 each
  }
  EXPECT_EQ(SimulatePipeline(PipelineSchedule::kGPipe, 2, {1.0, 1.0},
                             {1.0, 1.0}, 0.0, std::vector<int>{0})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PipelineScheduleTest, SlowStageAndTransfersLengthenTheStep) {
  // Stage 1 twice as slow: it sets the pace.
  auto t =
      SimulatePipeline(PipelineSchedule::k1F1B, 4, {1.0, 2.0}, {1.0, 2.0}, 0.5);
  ASSERT_TRUE(t.ok()) << t.status();
  // F0 on stage 0 (1), transfer (0.5), then stage 1 is busy 4 x 4 = 16,
  // then its last backward's gradient goes back (0.5) to B3 on stage 0 (1).
  EXPECT_DOUBLE_EQ(t->step_seconds, 1.0 + 0.5 + 16.0 + 0.5 + 1.0);
  EXPECT_DOUBLE_EQ(t->idle_seconds[1], 3.0);
  EXPECT_EQ(SimulatePipeline(PipelineSchedule::kGPipe, 0, {1.0}, {1.0}, 0)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SimulatePipeline(PipelineSchedule::kGPipe, 2, {1.0}, {1.0, 1.0}, 0)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SimulatePipeline(PipelineSchedule::kGPipe, 2, {-1.0}, {1.0}, 0)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PipelineScheduleTest, ParsesScheduleNames) {
  EXPECT_EQ(*ParsePipelineSchedule("gpipe"), PipelineSchedule::kGPipe);
  EXPECT_EQ(*ParsePipelineSchedule("1f1b"), PipelineSchedule::k1F1B);
  EXPECT_EQ(ParsePipelineSchedule("zero-bubble").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_DOUBLE_EQ(PredictedBubble(1, 4), 0.0);
  EXPECT_DOUBLE_EQ(PredictedBubble(2, 4), 0.2);
}

}  // namespace
}  // namespace ferry

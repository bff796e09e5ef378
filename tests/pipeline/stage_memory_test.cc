#include "pipeline/stage_memory.h"

#include <string>

#include "gtest/gtest.h"
#include "model/model_presets.h"
#include "pipeline/in_memory_stage_link.h"
#include "tests/pipeline/pipeline_fixture.h"

namespace ferry {
namespace {

// The estimate's activations are what the stages allocated in a real step.
TEST(StageMemoryTest, ActivationEstimateEqualsWhatStagesAllocate) {
  for (PipelineSchedule schedule :
       {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B}) {
    for (const ModelDef& def : {MlpWithDropout(), ConvNetModelDef()}) {
      const PipelineCase c = MakeCase(def, 2, 8, 4, schedule);
      InMemoryStageHub hub(2);
      PipelineRun run = RunPipeline(
          c, [&](int s) -> StageLink& { return hub.Link(s); },
          [&](int, const absl::Status& status) { hub.Abort(status); });
      for (int s = 0; s < 2; ++s) {
        ASSERT_TRUE(run.statuses[s].ok()) << run.statuses[s];
        auto m = EstimateStageMemory(
            def, c.split[s], 2, PeakMicroBatchesInFlight(schedule, 2, s, 4), 0,
            true);
        ASSERT_TRUE(m.ok()) << m.status();
        EXPECT_EQ(m->activation_bytes, run.stages[s].activation_bytes)
            << PipelineScheduleName(schedule) << " stage " << s;
      }
    }
  }
}

TEST(StageMemoryTest, ParametersGradientsAndOptimizerFollowTheStage) {
  const ModelDef def = MlpModelDef({100, 50, 10});  // 5050 + 510 parameters
  auto first = EstimateStageMemory(def, {0, 2}, 4, 1, 2, false);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->parameter_bytes, 4 * 5050);
  EXPECT_EQ(first->gradient_bytes, 4 * 5050);
  EXPECT_EQ(first->optimizer_bytes, 4 * 2 * 5050);
  auto second = EstimateStageMemory(def, {2, 3}, 4, 1, 0, true);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->parameter_bytes, 4 * 510);
  EXPECT_EQ(second->gradient_bytes, 2 * 4 * 510);
  // Accumulating over both layers: the scratch is the larger layer's.
  auto both = EstimateStageMemory(def, {0, 3}, 4, 1, 0, true);
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->gradient_bytes, 4 * (5560 + 5050));
  EXPECT_EQ(second->optimizer_bytes, 0);
  EXPECT_EQ(EstimateStageMemory(def, {0, 2}, 0, 1, 0, false).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EstimateStageMemory(def, {2, 5}, 4, 1, 0, false).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A model over the budget on one worker fits it in two stages.
TEST(StageMemoryTest, BudgetRefusesOneStageAndAcceptsTwo) {
  const ModelDef def = MlpModelDef({1024, 2048, 2048, 10});  // ~6.3M params
  const auto one = SplitModel(def, 1, {}, StageBalance::kParams);
  const auto two = SplitModel(def, 2, {}, StageBalance::kParams);
  ASSERT_TRUE(one.ok() && two.ok());
  const int64_t budget = int64_t{80} << 20;  // 80 MiB; momentum on workers
  absl::Status refused =
      CheckPipelineMemory(def, *one, 64, 4, PipelineSchedule::k1F1B, 1, budget);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("the model (layers 0-4) needs about"),
            std::string::npos)
      << refused;
  EXPECT_NE(refused.message().find("--pipeline-stages"), std::string::npos);
  EXPECT_TRUE(
      CheckPipelineMemory(def, *two, 64, 4, PipelineSchedule::k1F1B, 1, budget)
          .ok());
  EXPECT_TRUE(
      CheckPipelineMemory(def, *one, 64, 4, PipelineSchedule::k1F1B, 1, 0)
          .ok());  // no budget
  EXPECT_EQ(
      CheckPipelineMemory(def, *two, 64, 65, PipelineSchedule::k1F1B, 1, budget)
          .code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ferry

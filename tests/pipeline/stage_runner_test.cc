#include "pipeline/stage_runner.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "compute/cpu_backend.h"
#include "gtest/gtest.h"
#include "model/model_presets.h"
#include "model/pipeline_split.h"
#include "model/sequential_model.h"
#include "pipeline/in_memory_stage_link.h"
#include "tests/pipeline/pipeline_fixture.h"

namespace ferry {
namespace {

void ExpectPipelineEqualsOneProcess(const ModelDef& def, int batch) {
  for (int p : {2, 3}) {
    for (int micro : {1, 4}) {
      for (PipelineSchedule schedule :
           {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B}) {
        const PipelineCase c = MakeCase(def, p, batch, micro, schedule);
        SCOPED_TRACE(::testing::Message()
                     << "P=" << p << " M=" << micro << " "
                     << PipelineScheduleName(schedule) << " split "
                     << StageRangesString(c.split));
        const OneProcessStep want = RunOneProcess(c);
        InMemoryStageHub hub(p);
        PipelineRun run = RunPipeline(
            c, [&](int s) -> StageLink& { return hub.Link(s); },
            [&](int, const absl::Status& status) { hub.Abort(status); });
        for (const absl::Status& status : run.statuses) {
          ASSERT_TRUE(status.ok()) << status;
        }
        EXPECT_NEAR(run.loss.loss_sum, want.loss.loss_sum,
                    1e-4 * std::abs(want.loss.loss_sum));
        EXPECT_EQ(run.loss.correct, want.loss.correct);
        EXPECT_LT(WorstRelativeError(run.grads, want.grads), 1e-4);
        // Bytes between stages: every micro-batch's boundary activations
        // forward and their gradients back, so each stage sends (and
        // receives) its output boundary plus its input boundary.
        auto backend = MakeCpuBackend(1);
        std::vector<int64_t> boundary(p, 0);  // [s]: after stage s
        for (int s = 0; s + 1 < p; ++s) {
          boundary[s] = 4LL * batch *
                        PipelineStage::Create(def, c.split[s], backend.get())
                            ->output_elements();
        }
        for (int s = 0; s < p; ++s) {
          const int64_t both = boundary[s] + (s > 0 ? boundary[s - 1] : 0);
          EXPECT_EQ(run.stages[s].bytes_sent, both);
          EXPECT_EQ(run.stages[s].bytes_received, both);
          EXPECT_EQ(run.stages[s].peak_micro_batches_in_flight,
                    PeakMicroBatchesInFlight(schedule, p, s, micro));
        }
      }
    }
  }
}

TEST(StageRunnerTest, MlpWithDropoutEqualsOneProcess) {
  ExpectPipelineEqualsOneProcess(MlpWithDropout(), 10);
}

TEST(StageRunnerTest, ConvNetEqualsOneProcess) {
  ExpectPipelineEqualsOneProcess(ConvNetModelDef(), 6);
}

TEST(StageRunnerTest, OneForwardOneBackwardHoldsFewerActivations) {
  const ModelDef def = MlpModelDef({64, 256, 256, 10});
  std::vector<PipelineRun> runs;
  for (PipelineSchedule schedule :
       {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B}) {
    const PipelineCase c = MakeCase(def, 2, 16, 8, schedule);
    InMemoryStageHub hub(2);
    runs.push_back(RunPipeline(
        c, [&](int s) -> StageLink& { return hub.Link(s); },
        [&](int, const absl::Status& status) { hub.Abort(status); }));
  }
  EXPECT_EQ(runs[0].stages[0].peak_micro_batches_in_flight, 8);
  EXPECT_EQ(runs[1].stages[0].peak_micro_batches_in_flight, 2);
  EXPECT_EQ(runs[1].stages[0].activation_bytes * 4,
            runs[0].stages[0].activation_bytes);
}

TEST(StageRunnerTest, MicroBatchesCoverTheBatchInNearlyEqualParts) {
  for (int batch = 1; batch <= 17; ++batch) {
    for (int micro = 1; micro <= batch; ++micro) {
      int next = 0;
      for (int m = 0; m < micro; ++m) {
        const RowRange r = MicroBatchRows(batch, micro, m);
        EXPECT_EQ(r.first, next);
        EXPECT_TRUE(r.count == batch / micro || r.count == batch / micro + 1);
        next += r.count;
      }
      EXPECT_EQ(next, batch);
    }
  }
}

TEST(StageRunnerTest, LostNeighbourEndsTheStepWithinItsDeadline) {
  const ModelDef def = MlpModelDef({8, 6, 4});
  auto backend = MakeCpuBackend(1);
  auto stage = PipelineStage::Create(def, {0, 2}, backend.get());
  ASSERT_TRUE(stage.ok()) << stage.status();
  std::vector<float> params(stage->param_count(), 0.1f);
  std::vector<float> grads(stage->param_count());
  const std::vector<float> inputs = RandomInputs(8 * 4, 3);
  InMemoryStageHub hub(2);
  StageStepInput in;
  in.batch = 4;
  in.micro_batches = 2;
  in.inputs = inputs;
  in.receive_timeout = absl::Milliseconds(50);
  // Stage 1 never runs: stage 0's first backward waits for its gradient.
  auto lost = RunStageStep(*stage, 0, 2, hub.Link(0), params.data(),
                           grads.data(), in, *RealClock());
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(lost.status().message().find("output gradient from stage 1"),
            std::string::npos)
      << lost.status();
  hub.Abort(absl::AbortedError("stage 1 left the job"));
  in.receive_timeout = absl::Seconds(30);
  auto aborted = RunStageStep(*stage, 0, 2, hub.Link(0), params.data(),
                              grads.data(), in, *RealClock());
  EXPECT_EQ(aborted.status().code(), absl::StatusCode::kAborted);
}

TEST(StageRunnerTest, BadStepInputIsRefused) {
  const ModelDef def = MlpModelDef({8, 6, 4});
  auto backend = MakeCpuBackend(1);
  auto stage = PipelineStage::Create(def, {0, 3}, backend.get());
  ASSERT_TRUE(stage.ok());
  std::vector<float> params(stage->param_count()), grads(params.size());
  const std::vector<float> inputs(8 * 4, 0.5f);
  const std::vector<int32_t> labels(4, 1);
  InMemoryStageHub hub(1);
  StageStepInput in;
  in.batch = 4;
  in.micro_batches = 5;  // more than rows
  in.inputs = inputs;
  in.labels = labels;
  EXPECT_EQ(RunStageStep(*stage, 0, 1, hub.Link(0), params.data(), grads.data(),
                         in, *RealClock())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  in.micro_batches = 2;
  in.inputs = absl::MakeConstSpan(inputs).subspan(1);
  EXPECT_EQ(RunStageStep(*stage, 0, 1, hub.Link(0), params.data(), grads.data(),
                         in, *RealClock())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  in.inputs = inputs;
  in.labels = absl::MakeConstSpan(labels).subspan(1);
  EXPECT_EQ(RunStageStep(*stage, 0, 1, hub.Link(0), params.data(), grads.data(),
                         in, *RealClock())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PipelineStage::Create(def, {1, 2}, backend.get()).ok(), true);
  EXPECT_EQ(PipelineStage::Create(def, {2, 4}, backend.get()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ferry

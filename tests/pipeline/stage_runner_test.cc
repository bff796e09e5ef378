#include "pipeline/stage_runner.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "compute/cpu_backend.h"
#include "gtest/gtest.h"
#include "model/model_presets.h"
#include "model/pipeline_split.h"
#include "model/sequential_model.h"
#include "pipeline/in_memory_stage_link.h"

namespace ferry {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<int32_t> Labels(int n, int classes) {
  std::vector<int32_t> l(n);
  for (int i = 0; i < n; ++i) l[i] = (i * 7 + 3) % classes;
  return l;
}

// A small MLP with dropout, so the test also covers the masks' keys.
ModelDef MlpWithDropout() {
  ModelDef def = MlpModelDef({20, 16, 12, 8, 5});
  LayerDef dropout;
  dropout.type = LayerType::kDropout;
  dropout.p = 0.3;
  def.layers.insert(def.layers.begin() + 2, dropout);
  return def;
}

struct PipelineRun {
  LossStats loss;
  std::vector<float> grads;  // the whole model's, stage by stage
  std::vector<StageStepResult> stages;
};

// One step of `def` split as `split`, one thread per stage over an in-memory
// hub.
PipelineRun RunPipeline(const ModelDef& def,
                        const std::vector<StageRange>& split,
                        const std::vector<float>& params,
                        const std::vector<float>& inputs,
                        const std::vector<int32_t>& labels, int batch,
                        int micro, PipelineSchedule schedule,
                        const StepContext& context) {
  const int p = static_cast<int>(split.size());
  auto backend = MakeCpuBackend(1);
  InMemoryStageHub hub(p);
  std::vector<PipelineStage> stages;
  for (const StageRange& r : split) {
    auto stage = PipelineStage::Create(def, r, backend.get());
    EXPECT_TRUE(stage.ok()) << stage.status();
    stages.push_back(std::move(*stage));
  }
  PipelineRun run;
  run.grads.assign(params.size(), -7.0f);
  run.stages.resize(p);
  std::vector<absl::Status> statuses(p);
  std::vector<std::thread> threads;
  for (int s = 0; s < p; ++s) {
    threads.emplace_back([&, s] {
      StageStepInput in;
      in.step = 3;
      in.context = context;
      in.batch = batch;
      in.micro_batches = micro;
      in.schedule = schedule;
      if (s == 0) in.inputs = inputs;
      if (s == p - 1) in.labels = labels;
      in.receive_timeout = absl::Seconds(30);
      PipelineStage& stage = stages[s];
      auto result = RunStageStep(
          stage, s, p, hub.Link(s), params.data() + stage.param_offset(),
          run.grads.data() + stage.param_offset(), in, *RealClock());
      statuses[s] = result.status();
      if (result.ok()) run.stages[s] = *result;
      if (!result.ok()) hub.Abort(result.status());
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
  run.loss = run.stages.back().loss;
  return run;
}

void ExpectPipelineEqualsOneProcess(const ModelDef& def, int batch) {
  auto backend = MakeCpuBackend(1);
  auto model = SequentialModel::Create(def, backend.get());
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<float> params = model->InitialParameters(11);
  const std::vector<float> inputs =
      Random(static_cast<size_t>(batch) * model->input_dim(), 5);
  const std::vector<int32_t> labels = Labels(batch, model->num_classes());
  const StepContext context{42, 2, 100};
  std::vector<float> want(params.size());
  auto want_loss =
      model->ForwardBackward(params.data(), inputs.data(), labels.data(), batch,
                             1.0f, want.data(), {}, context);
  ASSERT_TRUE(want_loss.ok()) << want_loss.status();
  for (int p : {2, 3}) {
    auto split = SplitModel(def, p, {}, StageBalance::kCompute);
    ASSERT_TRUE(split.ok()) << split.status();
    for (int micro : {1, 4}) {
      for (PipelineSchedule schedule :
           {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B}) {
        SCOPED_TRACE(::testing::Message()
                     << "P=" << p << " M=" << micro << " "
                     << PipelineScheduleName(schedule) << " split "
                     << StageRangesString(*split));
        PipelineRun run = RunPipeline(def, *split, params, inputs, labels,
                                      batch, micro, schedule, context);
        EXPECT_NEAR(run.loss.loss_sum, want_loss->loss_sum,
                    1e-4 * std::abs(want_loss->loss_sum));
        EXPECT_EQ(run.loss.correct, want_loss->correct);
        double worst = 0.0;
        for (size_t i = 0; i < want.size(); ++i) {
          worst = std::max(worst, std::abs(double(run.grads[i]) - want[i]) /
                                      std::max(1.0, std::abs(double(want[i]))));
        }
        EXPECT_LT(worst, 1e-4);
        // Bytes between stages: every micro-batch's boundary activations
        // forward and their gradients back, so each stage sends (and
        // receives) its output boundary plus its input boundary.
        std::vector<int64_t> boundary(p, 0);  // [s]: after stage s
        for (int s = 0; s + 1 < p; ++s) {
          boundary[s] = 4LL * batch *
                        PipelineStage::Create(def, (*split)[s], backend.get())
                            ->output_elements();
        }
        for (int s = 0; s < p; ++s) {
          const int64_t both = boundary[s] + (s > 0 ? boundary[s - 1] : 0);
          EXPECT_EQ(run.stages[s].bytes_sent, both);
          EXPECT_EQ(run.stages[s].bytes_received, both);
        }
        for (int s = 0; s < p; ++s) {
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
  auto split = SplitModel(def, 2, {}, StageBalance::kCompute);
  ASSERT_TRUE(split.ok());
  auto backend = MakeCpuBackend(1);
  auto model = SequentialModel::Create(def, backend.get());
  const std::vector<float> params = model->InitialParameters(1);
  const std::vector<float> inputs = Random(64 * 16, 2);
  const std::vector<int32_t> labels = Labels(16, 10);
  PipelineRun gpipe = RunPipeline(def, *split, params, inputs, labels, 16, 8,
                                  PipelineSchedule::kGPipe, {});
  PipelineRun one_f_one_b = RunPipeline(def, *split, params, inputs, labels, 16,
                                        8, PipelineSchedule::k1F1B, {});
  EXPECT_EQ(gpipe.stages[0].peak_micro_batches_in_flight, 8);
  EXPECT_EQ(one_f_one_b.stages[0].peak_micro_batches_in_flight, 2);
  EXPECT_EQ(one_f_one_b.stages[0].activation_bytes * 4,
            gpipe.stages[0].activation_bytes);
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
  const std::vector<float> inputs = Random(8 * 4, 3);
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

#include "client/pipeline_cost_model.h"

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "compute/cpu_backend.h"
#include "gtest/gtest.h"
#include "model/model_presets.h"
#include "model/pipeline_stage.h"
#include "pipeline/in_memory_stage_link.h"
#include "pipeline/stage_runner.h"

namespace ferry {
namespace {

PipelineCostInput Input(const ModelDef& def, int workers, int stages, int micro,
                        int64_t batch) {
  PipelineCostInput in;
  in.def = def;
  in.pipeline.stages = stages;
  in.pipeline.micro_batches = micro;
  in.batch = batch;
  in.link.workers = workers;
  in.link.bandwidth_bytes_per_second = 1e9;
  in.link.latency_seconds = 0;
  in.link.compute_seconds = 0.03;
  return in;
}

// What each stage of a real pipelined step sends and receives, in memory.
std::vector<StageStepResult> RunSteps(const ModelDef& def,
                                      const std::vector<StageRange>& split,
                                      int batch, int micro) {
  const int p = static_cast<int>(split.size());
  InMemoryStageHub hub(p);
  std::vector<StageStepResult> results(p);
  std::vector<std::thread> threads;
  const std::vector<float> inputs(
      static_cast<size_t>(batch) * ShapeElements(def.input.shape), 0.5f);
  const std::vector<int32_t> labels(batch, 1);
  for (int s = 0; s < p; ++s) {
    threads.emplace_back([&, s] {
      auto backend = MakeCpuBackend(1);
      auto stage = PipelineStage::Create(def, split[s], backend.get());
      ASSERT_TRUE(stage.ok()) << stage.status();
      std::vector<float> params(stage->param_count(), 0.01f);
      std::vector<float> grads(params.size());
      StageStepInput in;
      in.batch = batch;
      in.micro_batches = micro;
      if (s == 0) in.inputs = inputs;
      if (s == p - 1) in.labels = labels;
      auto r = RunStageStep(*stage, s, p, hub.Link(s), params.data(),
                            grads.data(), in, *RealClock());
      ASSERT_TRUE(r.ok()) << r.status();
      results[s] = *r;
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

// The predicted bytes between stages are exactly what stages move.
TEST(PipelineCostModelTest, NeighbourBytesAreWhatStagesMove) {
  for (const ModelDef& def :
       {MlpModelDef({64, 48, 32, 24, 10}), ConvNetModelDef()}) {
    for (int stages : {2, 3}) {
      // Two replicas: each runs batch / 2 rows.
      auto p = PredictPipelineStep(Input(def, 2 * stages, stages, 2, 16));
      ASSERT_TRUE(p.ok()) << p.status();
      std::vector<StageRange> split;
      for (const StageCost& c : p->stages) split.push_back(c.layers);
      const std::vector<StageStepResult> measured =
          RunSteps(def, split, static_cast<int>(p->replica_batch), 2);
      for (int s = 0; s < stages; ++s) {
        EXPECT_EQ(p->stages[s].neighbour_bytes_sent, measured[s].bytes_sent)
            << "stage " << s;
        EXPECT_EQ(p->stages[s].neighbour_bytes_received,
                  measured[s].bytes_received);
      }
    }
  }
}

TEST(PipelineCostModelTest, ComputeFollowsTheSplitAndTheTimeline) {
  // Four equal Linear(256, 256) layers, no ReLU: equal stages.
  ModelDef def = MlpModelDef({256, 256, 256, 256, 256});
  def.layers.erase(std::remove_if(def.layers.begin(), def.layers.end(),
                                  [](const LayerDef& l) {
                                    return l.type == LayerType::kReLU;
                                  }),
                   def.layers.end());
  PipelineCostInput in = Input(def, 4, 4, 8, 64);
  in.link.bandwidth_bytes_per_second = 0;  // no link time
  auto p = PredictPipelineStep(in);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->stages.size(), 4u);
  EXPECT_EQ(p->replicas, 1);
  EXPECT_NEAR(p->timeline.bubble, PredictedBubble(4, 8), 1e-12);
  // The replica's compute is P x one worker's; each stage a quarter of it.
  const double per_micro = 0.03 * 4 / 4 / 8;
  EXPECT_NEAR(p->stages[0].forward_seconds + p->stages[0].backward_seconds,
              per_micro, 1e-12);
  EXPECT_NEAR(p->timeline.step_seconds, per_micro * (8 + 4 - 1), 1e-12);
  EXPECT_EQ(p->allreduce_seconds, 0.0);  // one replica
}

TEST(PipelineCostModelTest, EachStageAllReducesItsOwnTensorsAcrossReplicas) {
  const ModelDef def = MlpModelDef({100, 80, 60, 10});
  auto p = PredictPipelineStep(Input(def, 6, 2, 2, 60));  // 3 replicas
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->replicas, 3);
  EXPECT_EQ(p->replica_batch, 20);
  int64_t params = 0;
  for (const StageCost& c : p->stages) {
    params += c.params;
    CostInput ring;
    ring.mode = CostMode::kRing;
    ring.workers = 3;
    ring.bandwidth_bytes_per_second = 1e9;
    ring.tensor_sizes = c.layers.first_layer == 0
                            ? std::vector<int64_t>{8000, 80}
                            : std::vector<int64_t>{4800, 60, 600, 10};
    auto want = PredictStep(ring);
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(c.allreduce_bytes_sent, want->worker.sent);
    EXPECT_DOUBLE_EQ(c.allreduce_seconds, want->comm_seconds);
  }
  EXPECT_EQ(params, 8080 + 4860 + 610);
  EXPECT_GT(p->step_seconds, p->timeline.step_seconds);
}

TEST(PipelineCostModelTest, RefusesWhatCannotRun) {
  const ModelDef def = MlpModelDef({100, 80, 60, 10});
  auto uneven = PredictPipelineStep(Input(def, 5, 2, 2, 64));
  EXPECT_EQ(uneven.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(uneven.status().message().find("multiple of --pipeline-stages"),
            std::string::npos);
  EXPECT_EQ(PredictPipelineStep(Input(def, 4, 2, 64, 64)).status().code(),
            absl::StatusCode::kInvalidArgument);  // 32 rows per replica
  EXPECT_EQ(PredictPipelineStep(Input(def, 4, 4, 2, 64)).status().code(),
            absl::StatusCode::kInvalidArgument);  // 3 layers with parameters
}

}  // namespace
}  // namespace ferry

#include "tests/pipeline/pipeline_fixture.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>

#include "compute/cpu_backend.h"
#include "gtest/gtest.h"
#include "model/model_presets.h"
#include "model/pipeline_stage.h"

namespace ferry {

std::vector<float> RandomInputs(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<int32_t> CycleLabels(int n, int classes) {
  std::vector<int32_t> l(n);
  for (int i = 0; i < n; ++i) l[i] = (i * 7 + 3) % classes;
  return l;
}

ModelDef MlpWithDropout() {
  ModelDef def = MlpModelDef({20, 16, 12, 8, 5});
  LayerDef dropout;
  dropout.type = LayerType::kDropout;
  dropout.p = 0.3;
  def.layers.insert(def.layers.begin() + 2, dropout);
  return def;
}

PipelineCase MakeCase(const ModelDef& def, int stages, int batch,
                      int micro_batches, PipelineSchedule schedule) {
  PipelineCase c;
  c.def = def;
  auto split = SplitModel(def, stages, {}, StageBalance::kCompute);
  EXPECT_TRUE(split.ok()) << split.status();
  if (split.ok()) c.split = *split;
  auto backend = MakeCpuBackend(1);
  auto model = SequentialModel::Create(def, backend.get());
  EXPECT_TRUE(model.ok()) << model.status();
  c.params = model->InitialParameters(11);
  c.inputs = RandomInputs(static_cast<size_t>(batch) * model->input_dim(), 5);
  c.labels = CycleLabels(batch, model->num_classes());
  c.batch = batch;
  c.micro_batches = micro_batches;
  c.schedule = schedule;
  c.context = StepContext{42, 2, 100};
  return c;
}

PipelineRun RunPipeline(
    const PipelineCase& c, const std::function<StageLink&(int)>& link,
    const std::function<void(int, const absl::Status&)>& on_error) {
  const int p = static_cast<int>(c.split.size());
  PipelineRun run;
  run.grads.assign(c.params.size(), -7.0f);
  run.stages.resize(p);
  run.statuses.resize(p);
  std::vector<std::thread> threads;
  for (int s = 0; s < p; ++s) {
    threads.emplace_back([&, s] {
      auto backend = MakeCpuBackend(1);
      auto stage = PipelineStage::Create(c.def, c.split[s], backend.get());
      if (!stage.ok()) {
        run.statuses[s] = stage.status();
        return;
      }
      StageStepInput in;
      in.step = 3;
      in.context = c.context;
      in.batch = c.batch;
      in.micro_batches = c.micro_batches;
      in.schedule = c.schedule;
      if (s == 0) in.inputs = c.inputs;
      if (s == p - 1) in.labels = c.labels;
      in.receive_timeout = c.receive_timeout;
      auto result = RunStageStep(
          *stage, s, p, link(s), c.params.data() + stage->param_offset(),
          run.grads.data() + stage->param_offset(), in, *RealClock());
      run.statuses[s] = result.status();
      if (result.ok()) {
        run.stages[s] = *result;
      } else if (on_error) {
        on_error(s, result.status());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  run.loss = run.stages.back().loss;
  return run;
}

OneProcessStep RunOneProcess(const PipelineCase& c) {
  auto backend = MakeCpuBackend(1);
  auto model = SequentialModel::Create(c.def, backend.get());
  EXPECT_TRUE(model.ok()) << model.status();
  OneProcessStep step;
  step.grads.assign(c.params.size(), 0.0f);
  auto loss =
      model->ForwardBackward(c.params.data(), c.inputs.data(), c.labels.data(),
                             c.batch, 1.0f, step.grads.data(), {}, c.context);
  EXPECT_TRUE(loss.ok()) << loss.status();
  if (loss.ok()) step.loss = *loss;
  return step;
}

double WorstRelativeError(const std::vector<float>& a,
                          const std::vector<float>& b) {
  if (a.size() != b.size()) return 1e30;
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(double(a[i]) - b[i]) /
                                std::max(1.0, std::abs(double(b[i]))));
  }
  return worst;
}

}  // namespace ferry

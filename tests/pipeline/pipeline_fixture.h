// Helpers of the pipeline tests: one step of a model split into stages, one
// thread (and one CPU backend) per stage over any StageLinks, and the same
// step in one process to compare with.
#ifndef FERRY_TESTS_PIPELINE_PIPELINE_FIXTURE_H_
#define FERRY_TESTS_PIPELINE_PIPELINE_FIXTURE_H_

#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "model/model_def.h"
#include "model/pipeline_split.h"
#include "model/sequential_model.h"
#include "pipeline/stage_link.h"
#include "pipeline/stage_runner.h"

namespace ferry {

std::vector<float> RandomInputs(size_t n, uint32_t seed);
std::vector<int32_t> CycleLabels(int n, int classes);

// A small MLP with dropout, so the tests also cover the masks' keys.
ModelDef MlpWithDropout();

struct PipelineCase {
  ModelDef def;
  std::vector<StageRange> split;
  std::vector<float> params;  // the whole model's
  std::vector<float> inputs;  // [batch, input]
  std::vector<int32_t> labels;
  int batch = 0;
  int micro_batches = 1;
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  StepContext context;
  absl::Duration receive_timeout = absl::Seconds(30);
};

// `def` with seeded parameters and inputs, split by compute into `stages`.
PipelineCase MakeCase(const ModelDef& def, int stages, int batch,
                      int micro_batches, PipelineSchedule schedule);

struct PipelineRun {
  LossStats loss;
  std::vector<float> grads;  // the whole model's, stage by stage
  std::vector<StageStepResult> stages;
  std::vector<absl::Status> statuses;
};

// Runs one step; `link(s)` is stage s's link; `on_error(s, status)` is
// called on stage s's thread when its step fails (e.g. to abort the links).
PipelineRun RunPipeline(
    const PipelineCase& c, const std::function<StageLink&(int)>& link,
    const std::function<void(int, const absl::Status&)>& on_error = {});

struct OneProcessStep {
  LossStats loss;
  std::vector<float> grads;
};
OneProcessStep RunOneProcess(const PipelineCase& c);

// max |a - b| / max(1, |b|).
double WorstRelativeError(const std::vector<float>& a,
                          const std::vector<float>& b);

}  // namespace ferry

#endif  // FERRY_TESTS_PIPELINE_PIPELINE_FIXTURE_H_

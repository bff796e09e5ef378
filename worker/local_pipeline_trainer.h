// LocalPipelineTrainer: the LeaseTrainer (worker/lease_trainer.h) of a
// pipeline job trained in one process (ferry-worker --standalone with
// --pipeline-stages): the model split into P stages (model/pipeline_split.h),
// each on its own thread (worker/stage_crew.h) with its own compute backend
// (on a GPU machine, GPU s % count), the stages linked in memory
// (pipeline/in_memory_stage_link.h). One lease:
//
//   stage the batch on the host -> exchange.BeginStep -> every stage copies
//   its range of the flat weights in, runs the GPipe or 1F1B schedule over
//   the micro-batches (pipeline/stage_runner.h) and copies its gradient sum
//   (and its BatchNorm state's change times the batch, as StepTrainer
//   declares it) out -> exchange.Ready(whole buffer) -> exchange.FinishStep.
//
// The flat buffers (ModelJobLayout: parameters, then state) are host memory
// on a CPU backend, where the exchange applies the optimizer: the result is
// StepTrainer's up to float summation order, BatchNorm aside (it normalises
// per micro-batch). SummaryJson gives the split and each stage's figures.
//
// Thread safety: not thread-safe; the training loop's thread uses it.
#ifndef FERRY_WORKER_LOCAL_PIPELINE_TRAINER_H_
#define FERRY_WORKER_LOCAL_PIPELINE_TRAINER_H_

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "data/batch_stager.h"
#include "data/data_source.h"
#include "model/model_def.h"
#include "model/pipeline_split.h"
#include "pipeline/in_memory_stage_link.h"
#include "pipeline/pipeline_options.h"
#include "pipeline/stage_runner.h"
#include "worker/lease_samples.h"
#include "worker/lease_trainer.h"
#include "worker/stage_crew.h"

namespace ferry {

class LocalPipelineTrainer final : public LeaseTrainer {
 public:
  // Splits the job's model (JobPipelineOptions), checks each stage against
  // job.worker_memory_budget_bytes before anything is allocated, loads the
  // dataset and builds every stage on its thread. Errors: INVALID_ARGUMENT
  // for a split the model cannot take; RESOURCE_EXHAUSTED over the memory
  // budget; the reader's and the backends'.
  static absl::StatusOr<std::unique_ptr<LocalPipelineTrainer>> Create(
      const v1::JobSpec& job, DeviceChoice device, int threads);
  ~LocalPipelineTrainer() override;

  // Errors: LeaseSamples' INVALID_ARGUMENT, the exchange's, and the first
  // failing stage's.
  absl::StatusOr<StepResult> Train(const v1::NextTaskResponse& lease,
                                   int64_t generation,
                                   GradientExchange& exchange,
                                   Clock& clock) override;
  ComputeBackend* backend() const override { return host_.get(); }
  const ParameterLayout& layout() const override { return layout_; }
  const ExchangeBuffers& buffers() const override { return buffers_.view; }
  int64_t train_samples() const override { return data_.train.num_samples; }
  // {"pipeline": split, micro-batches, schedule, bubbles, per-stage figures}
  nlohmann::json SummaryJson() const override;

 private:
  struct Stage;
  LocalPipelineTrainer() = default;
  // Stage s's part of the current step.
  absl::Status RunStage(int s);

  ModelDef def_;
  PipelineOptions options_;
  std::vector<StageRange> split_;
  uint64_t seed_ = 0;
  int global_batch_ = 0;
  int input_dim_ = 0;
  int64_t parameters_ = 0;  // the flat buffer's parameter elements
  ParameterLayout layout_;
  TrainTestData data_;
  std::optional<LeaseSamples> lease_samples_;
  std::unique_ptr<ComputeBackend> host_;
  TrainerBuffers buffers_;
  std::optional<BatchStager> stager_;
  std::vector<Stage> stages_;
  std::unique_ptr<InMemoryStageHub> hub_;
  absl::Mutex abort_mu_;
  absl::Status abort_reason_ ABSL_GUARDED_BY(abort_mu_);
  // The current step's input, read by the stage threads during RunAll.
  StageStepInput input_;
  int64_t steps_ = 0;
  double step_wall_ = 0.0;  // per step, the slowest stage's time, summed
  // Declared last: its threads stop before the rest goes.
  std::unique_ptr<StageCrew> crew_;
};

}  // namespace ferry

#endif  // FERRY_WORKER_LOCAL_PIPELINE_TRAINER_H_

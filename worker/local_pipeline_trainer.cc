#include "worker/local_pipeline_trainer.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compute/cpu_backend.h"
#include "compute/optimizer.h"
#include "model/model_params.h"
#include "model/pipeline_stage.h"
#include "pipeline/stage_memory.h"
#include "pipeline/stage_runner.h"
#include "proto/job_convert.h"

namespace ferry {

// One stage's backend, layers and buffers, touched by its thread during a
// RunAll and by the trainer between them.
struct LocalPipelineTrainer::Stage {
  std::unique_ptr<ComputeBackend> backend;
  std::optional<PipelineStage> stage;
  DeviceBuffer params, grads;
  std::vector<float> state_before;  // host, the step's starting state
  // Training figures, summed over steps.
  double busy_seconds = 0.0;
  double wait_seconds = 0.0;
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int64_t peak_activation_bytes = 0;
  StageStepResult step;  // the last step's
};

LocalPipelineTrainer::~LocalPipelineTrainer() { crew_.reset(); }

absl::StatusOr<std::unique_ptr<LocalPipelineTrainer>>
LocalPipelineTrainer::Create(const v1::JobSpec& job, DeviceChoice device,
                             int threads) {
  auto t = std::unique_ptr<LocalPipelineTrainer>(new LocalPipelineTrainer());
  ASSIGN_OR_RETURN(t->def_, JobModel(job));
  ASSIGN_OR_RETURN(t->options_, JobPipelineOptions(job));
  ASSIGN_OR_RETURN(t->split_,
                   SplitModel(t->def_, t->options_.stages, t->options_.split,
                              t->options_.balance));
  const int p = static_cast<int>(t->split_.size());
  t->global_batch_ = job.global_batch();
  t->seed_ = job.seed();
  RETURN_IF_ERROR(CheckPipelineMemory(
      t->def_, t->split_, t->global_batch_, t->options_.micro_batches,
      t->options_.schedule,
      OptimizerStateBuffers(FromProto(job.optimizer()).kind),
      job.worker_memory_budget_bytes()));
  ASSIGN_OR_RETURN(t->layout_, ModelJobLayout(t->def_));
  ASSIGN_OR_RETURN(const ParameterLayout params, ModelParameterLayout(t->def_));
  t->parameters_ = params.total_elements();
  ASSIGN_OR_RETURN(t->data_, LoadTrainTest(job.dataset(), job.data_dir(),
                                           t->def_, job.seed()));
  t->lease_samples_.emplace(t->data_.train.num_samples, job.seed());
  t->host_ = MakeCpuBackend(std::max(1, threads));
  ASSIGN_OR_RETURN(
      t->buffers_,
      TrainerBuffers::Allocate(t->host_.get(), t->layout_.total_elements()));
  t->input_dim_ = static_cast<int>(ShapeElements(t->def_.input.shape));
  ASSIGN_OR_RETURN(BatchStager stager,
                   BatchStager::Create(t->host_.get(), t->input_dim_,
                                       std::max(1, t->global_batch_)));
  t->stager_.emplace(std::move(stager));
  t->stages_.resize(p);
  t->hub_ = std::make_unique<InMemoryStageHub>(p);
  {
    // Each stage's backend and buffers are made on its own thread (a CUDA
    // backend belongs to the thread's device).
    LocalPipelineTrainer* self = t.get();
    StageCrew setup(p, [self, device, threads](int s) -> absl::Status {
      Stage& st = self->stages_[s];
      ASSIGN_OR_RETURN(st.backend, MakeBackend(device, threads, s));
      ASSIGN_OR_RETURN(
          PipelineStage stage,
          PipelineStage::Create(self->def_, self->split_[s], st.backend.get()));
      st.stage.emplace(std::move(stage));
      ASSIGN_OR_RETURN(st.params,
                       st.backend->Allocate(st.stage->param_count()));
      ASSIGN_OR_RETURN(st.grads, st.backend->Allocate(st.stage->param_count()));
      st.state_before.resize(st.stage->state_count());
      return absl::OkStatus();
    });
    RETURN_IF_ERROR(FirstFailure(setup.RunAll(), absl::OkStatus()));
  }
  LocalPipelineTrainer* self = t.get();
  t->crew_ = std::make_unique<StageCrew>(
      p, [self](int s) { return self->RunStage(s); });
  return t;
}

absl::Status LocalPipelineTrainer::RunStage(int s) {
  Stage& st = stages_[s];
  PipelineStage& stage = *st.stage;
  const ExchangeBuffers& b = buffers_.view;
  const int64_t count = stage.param_count();
  RETURN_IF_ERROR(st.backend->CopyToDevice(b.params + stage.param_offset(),
                                           count, st.params.data()));
  const float* state = b.params + parameters_ + stage.state_offset();
  std::copy(state, state + stage.state_count(), st.state_before.begin());
  RETURN_IF_ERROR(stage.SetState(st.state_before));
  const int p = static_cast<int>(stages_.size());
  absl::StatusOr<StageStepResult> r =
      RunStageStep(stage, s, p, hub_->Link(s), st.params.data(),
                   st.grads.data(), input_, *RealClock());
  if (!r.ok()) {
    absl::MutexLock lock(&abort_mu_);
    if (abort_reason_.ok()) {
      abort_reason_ = absl::AbortedError(absl::StrCat(
          "pipeline stage ", s, " failed: ", r.status().message()));
      hub_->Abort(abort_reason_);
    }
    return r.status();
  }
  st.step = *r;
  st.busy_seconds += r->busy_seconds;
  st.wait_seconds += r->wait_seconds;
  st.bytes_sent += r->bytes_sent;
  st.bytes_received += r->bytes_received;
  st.peak_activation_bytes =
      std::max(st.peak_activation_bytes, r->activation_bytes);
  RETURN_IF_ERROR(st.backend->CopyToHost(st.grads.data(), count,
                                         b.host_grads + stage.param_offset()));
  // The state's change times the batch: the exchange's mean over the
  // step's samples is then the change (worker/step_trainer.h).
  ASSIGN_OR_RETURN(const std::vector<float> after, stage.GetState());
  float* change = b.host_grads + parameters_ + stage.state_offset();
  for (size_t i = 0; i < after.size(); ++i) {
    change[i] = (after[i] - st.state_before[i]) * input_.batch;
  }
  return absl::OkStatus();
}

absl::StatusOr<StepResult> LocalPipelineTrainer::Train(
    const v1::NextTaskResponse& lease, int64_t generation,
    GradientExchange& exchange, Clock& clock) {
  ASSIGN_OR_RETURN(const std::vector<int64_t> indices,
                   lease_samples_->Indices(lease, /*allow_empty=*/false));
  const int batch = static_cast<int>(indices.size());
  const absl::Time start = clock.Now();
  if (batch > global_batch_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a lease of ", batch, " samples; the batch is ", global_batch_));
  }
  RETURN_IF_ERROR(stager_->Stage(data_.train, indices));
  ExchangeStep step = ExchangeStep::Of(
      &lease, lease.generation() > 0 ? lease.generation() : generation, batch);
  RETURN_IF_ERROR(exchange.BeginStep(step));
  input_ = StageStepInput();
  input_.step = lease.step();
  input_.context =
      EpochPositionContext(seed_, lease.epoch(), lease.tasks(0).begin());
  input_.batch = batch;
  input_.micro_batches = std::min(options_.micro_batches, batch);
  input_.schedule = options_.schedule;
  input_.inputs = absl::MakeConstSpan(stager_->inputs(),
                                      static_cast<size_t>(batch) * input_dim_);
  input_.labels = absl::MakeConstSpan(stager_->labels(), batch);
  absl::Status abort_reason;
  const std::vector<absl::Status> statuses = crew_->RunAll();
  {
    absl::MutexLock lock(&abort_mu_);
    abort_reason = abort_reason_;
  }
  RETURN_IF_ERROR(FirstFailure(statuses, abort_reason));
  StepResult result;
  result.samples = batch;
  double slowest = 0.0;
  for (const Stage& st : stages_) {
    slowest = std::max(slowest, st.step.step_seconds);
  }
  step_wall_ += slowest;
  ++steps_;
  result.stats = stages_.back().step.loss;
  result.compute_seconds = absl::ToDoubleSeconds(clock.Now() - start);
  RETURN_IF_ERROR(exchange.Ready(0, buffers_.view.num_elements));
  RETURN_IF_ERROR(exchange.FinishStep());
  return result;
}

nlohmann::json LocalPipelineTrainer::SummaryJson() const {
  const int p = static_cast<int>(stages_.size());
  const int micro = options_.micro_batches;
  nlohmann::json per_stage = nlohmann::json::array();
  std::vector<double> forward, backward;
  std::vector<int> devices;
  std::vector<std::string> gpus;
  std::string names;
  double measured_bubble = 0.0;
  for (int s = 0; s < p; ++s) {
    const Stage& st = stages_[s];
    const double idle = step_wall_ > 0
                            ? std::max(0.0, 1.0 - st.busy_seconds / step_wall_)
                            : 0.0;
    measured_bubble += idle;
    per_stage.push_back({{"stage", s},
                         {"layers", StageRangesString({&split_[s], 1})},
                         {"device", st.backend->Name()},
                         {"parameters", st.stage->param_count()},
                         {"busy_seconds", st.busy_seconds},
                         {"wait_seconds", st.wait_seconds},
                         {"idle_share", idle},
                         {"peak_activation_bytes", st.peak_activation_bytes},
                         {"bytes_sent", st.bytes_sent},
                         {"bytes_received", st.bytes_received}});
    // The timeline's inputs: a stage's busy time per micro-batch, a third
    // of it forward and two thirds backward (a backward pass computes two
    // GEMMs per forward one).
    const double per_micro =
        st.busy_seconds / std::max<double>(1.0, double(steps_) * micro);
    forward.push_back(per_micro / 3.0);
    backward.push_back(2.0 * per_micro / 3.0);
    // Stages on one GPU share it (one kernel stream at a time); CPU stages
    // run on their own threads.
    if (st.backend->IsHostMemory()) {
      devices.push_back(-1 - s);
      continue;
    }
    auto it = std::find(gpus.begin(), gpus.end(), st.backend->Name());
    if (it == gpus.end()) it = gpus.insert(gpus.end(), st.backend->Name());
    devices.push_back(static_cast<int>(it - gpus.begin()));
  }
  absl::StatusOr<PipelineTimeline> predicted = SimulatePipeline(
      options_.schedule, micro, forward, backward, 0.0, devices);
  return {{"pipeline",
           {{"stages", p},
            {"split", StageRangesString(split_)},
            {"micro_batches", micro},
            {"schedule", PipelineScheduleName(options_.schedule)},
            {"textbook_bubble", PredictedBubble(p, micro)},
            {"predicted_bubble", predicted.ok() ? predicted->bubble : 0.0},
            {"measured_bubble", p > 0 ? measured_bubble / p : 0.0},
            {"per_stage", std::move(per_stage)}}}};
}

}  // namespace ferry

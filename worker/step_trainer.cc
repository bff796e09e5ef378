#include "worker/step_trainer.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "common/step_trace.h"
#include "model/model_params.h"
#include "proto/job_convert.h"

namespace ferry {
namespace {

// Dropout masks by epoch position (EpochPositionContext): rows are staged
// in the order of the lease's tasks, each a range of epoch positions.
StepContext DropoutContext(const v1::NextTaskResponse& lease, uint64_t seed) {
  const int64_t first = lease.tasks_size() > 0 ? lease.tasks(0).begin() : 0;
  return EpochPositionContext(seed, lease.epoch(), first);
}

}  // namespace

absl::StatusOr<std::unique_ptr<StepTrainer>> StepTrainer::Create(
    const v1::JobSpec& job, DeviceChoice device, int threads) {
  auto trainer = std::unique_ptr<StepTrainer>(new StepTrainer());
  trainer->global_batch_ = job.global_batch();
  trainer->seed_ = job.seed();
  ASSIGN_OR_RETURN(ModelDef def, JobModel(job));
  ASSIGN_OR_RETURN(trainer->backend_, MakeBackend(device, threads));
  ComputeBackend* backend = trainer->backend_.get();
  ASSIGN_OR_RETURN(SequentialModel model,
                   SequentialModel::Create(def, backend));
  trainer->model_.emplace(std::move(model));
  ASSIGN_OR_RETURN(trainer->job_layout_, ModelJobLayout(def));
  RETURN_IF_ERROR(CheckJobTensors(job, trainer->job_layout_));
  trainer->state_before_.resize(trainer->state_elements());
  ASSIGN_OR_RETURN(trainer->data_, LoadTrainTest(job.dataset(), job.data_dir(),
                                                 def, job.seed()));
  trainer->lease_samples_.emplace(trainer->data_.train.num_samples, job.seed());
  const int64_t n = trainer->job_layout_.total_elements();
  ASSIGN_OR_RETURN(trainer->buffers_, TrainerBuffers::Allocate(backend, n));
  // Train() writes the gradients only after BeginStep, and never params.
  trainer->buffers_.view.grads_idle_between_steps = true;
  trainer->buffers_.view.params_written_only_by_exchange = true;
  const ExchangeBuffers& buffers = trainer->buffers_.view;
  // Ring members start from the job's initial parameters themselves. A PS
  // worker's (parameters and state) are all written by its first pull
  // before any step reads them, and the shards, not the workers, read
  // --init-from: computing them here would only double the startup peak.
  if (job.mode() == v1::MODE_RING && job.init_from().empty() &&
      backend->IsHostMemory()) {
    // Drawn straight into the parameters: no second copy of the model.
    RETURN_IF_ERROR(FillModelJobInitialValues(
        def, job.seed(), absl::MakeSpan(buffers.params, n)));
  } else if (job.mode() == v1::MODE_RING) {
    ASSIGN_OR_RETURN(const std::vector<float> init, JobInitialValues(job, def));
    RETURN_IF_ERROR(backend->CopyToDevice(init.data(), n, buffers.params));
  }
  return trainer;
}

absl::StatusOr<StepResult> StepTrainer::Train(const v1::NextTaskResponse& lease,
                                              int64_t generation,
                                              GradientExchange& exchange,
                                              Clock& clock) {
  const bool allow_empty = exchange.policy().allow_empty_batch;
  ASSIGN_OR_RETURN(std::vector<int64_t> indices,
                   lease_samples_->Indices(lease, allow_empty));
  const int batch = static_cast<int>(indices.size());
  const int64_t n = buffers_.view.num_elements;
  const absl::Time compute_start = clock.Now();
  if (!stager_.has_value() || stager_max_ < batch) {
    stager_max_ = std::max({batch, global_batch_, 1});
    ASSIGN_OR_RETURN(
        BatchStager stager,
        BatchStager::Create(backend_.get(), model_->input_dim(), stager_max_));
    stager_.emplace(std::move(stager));
  }
  if (batch > 0) RETURN_IF_ERROR(stager_->Stage(data_.train, indices));
  StepResult result;
  result.samples = batch;
  result.compute_seconds = SecondsSince(clock, compute_start);

  const absl::Time prepare_start = clock.Now();
  ExchangeStep step;
  step.lease = &lease;
  step.generation = lease.generation() > 0 ? lease.generation() : generation;
  step.num_samples = batch;
  RETURN_IF_ERROR(exchange.BeginStep(step));
  StepTrace::Record(StepEvent::kBegun, lease.step());
  result.comm_seconds = SecondsSince(clock, prepare_start);

  float* host_grads = buffers_.view.host_grads;
  const bool host_memory = backend_->IsHostMemory();
  absl::Status ready_status;
  const auto on_ready = [&](int64_t offset, int64_t length) {
    if (!ready_status.ok()) return;
    if (host_memory) {
      ready_status = backend_->Synchronize();
    } else {
      ready_status = backend_->CopyToHost(buffers_.view.grads + offset, length,
                                          host_grads + offset);
    }
    if (!ready_status.ok()) return;
    ready_status = exchange.Ready(offset, length);
  };
  const absl::Time backward_start = clock.Now();
  if (batch > 0) {
    RETURN_IF_ERROR(LoadState());
    ASSIGN_OR_RETURN(result.stats, model_->ForwardBackward(
                                       buffers_.view.params, stager_->inputs(),
                                       stager_->labels(), batch,
                                       /*grad_scale=*/1.0f, buffers_.view.grads,
                                       on_ready, DropoutContext(lease, seed_)));
    RETURN_IF_ERROR(ready_status);
    RETURN_IF_ERROR(DeclareStateChange(batch, exchange));
  } else {  // a rank without samples contributes zeros
    std::fill(host_grads, host_grads + n, 0.0f);
    ready_status = exchange.Ready(0, n);
  }
  RETURN_IF_ERROR(ready_status);
  result.compute_seconds += SecondsSince(clock, backward_start);
  const absl::Time finish_start = clock.Now();
  StepTrace::Record(StepEvent::kComputed, lease.step());
  RETURN_IF_ERROR(exchange.FinishStep());
  StepTrace::Record(StepEvent::kFinished, lease.step());
  result.comm_seconds += SecondsSince(clock, finish_start);
  return result;
}

absl::Status StepTrainer::LoadState() {
  const int64_t s = state_elements();
  if (s == 0) return absl::OkStatus();
  const float* exchanged =
      buffers_.view.params + (buffers_.view.num_elements - s);
  RETURN_IF_ERROR(backend_->Copy(exchanged, s, model_->state()));
  return backend_->CopyToHost(exchanged, s, state_before_.data());
}

absl::Status StepTrainer::DeclareStateChange(int batch,
                                             GradientExchange& exchange) {
  const int64_t s = state_elements();
  if (s == 0) return absl::OkStatus();
  const int64_t offset = buffers_.view.num_elements - s;
  float* change = buffers_.view.host_grads + offset;
  RETURN_IF_ERROR(backend_->CopyToHost(model_->state(), s, change));
  for (int64_t i = 0; i < s; ++i) {
    change[i] = (change[i] - state_before_[i]) * static_cast<float>(batch);
  }
  return exchange.Ready(offset, s);
}

}  // namespace ferry

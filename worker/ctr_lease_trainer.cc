#include "worker/ctr_lease_trainer.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "data/criteo_format.h"
#include "proto/job_convert.h"

namespace ferry {

absl::StatusOr<std::unique_ptr<CtrLeaseTrainer>> CtrLeaseTrainer::Create(
    const v1::JobSpec& job, DeviceChoice device, int threads) {
  ASSIGN_OR_RETURN(const DlrmSpec spec, JobDlrmSpec(job));
  if (spec.dense_features != kCriteoDense ||
      spec.num_fields != kCriteoCategorical) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the job's DLRM has %d dense features and %d categorical fields; "
        "Criteo data has %d and %d",
        spec.dense_features, spec.num_fields, kCriteoDense,
        kCriteoCategorical));
  }
  ASSIGN_OR_RETURN(const std::string dir, ParseCtrDatasetSpec(job.dataset()));
  auto trainer = std::unique_ptr<CtrLeaseTrainer>(new CtrLeaseTrainer());
  ASSIGN_OR_RETURN(trainer->layout_, DlrmParameterLayout(spec));
  RETURN_IF_ERROR(CheckJobTensors(job, trainer->layout_));
  ASSIGN_OR_RETURN(trainer->backend_, MakeBackend(device, threads));
  ComputeBackend* backend = trainer->backend_.get();
  ASSIGN_OR_RETURN(CtrStep step, CtrStep::Create(spec, backend));
  trainer->step_.emplace(std::move(step));
  ASSIGN_OR_RETURN(const std::string train_path, FindCtrFile(dir, "train"));
  ASSIGN_OR_RETURN(trainer->train_, CtrDataset::LoadFile(train_path));
  trainer->lease_samples_.emplace(trainer->train_.num_samples(), job.seed());
  ASSIGN_OR_RETURN(
      trainer->buffers_,
      TrainerBuffers::Allocate(backend, trainer->layout_.total_elements()));
  // PS: the dense weights are all written by the first pull. Ring and
  // hybrid: the ring members start from the job's initial dense parameters
  // themselves (rank 0's are broadcast into every new ring).
  if (ModeHasRing(job.mode())) {
    ASSIGN_OR_RETURN(const std::vector<float> init, JobDenseInitialValues(job));
    RETURN_IF_ERROR(backend->CopyToDevice(init.data(),
                                          static_cast<int64_t>(init.size()),
                                          trainer->buffers_.view.params));
  }
  return trainer;
}

absl::StatusOr<StepResult> CtrLeaseTrainer::Train(
    const v1::NextTaskResponse& lease, int64_t generation,
    GradientExchange& exchange, Clock& clock) {
  ASSIGN_OR_RETURN(
      std::vector<int64_t> indices,
      lease_samples_->Indices(lease, exchange.policy().allow_empty_batch));
  ASSIGN_OR_RETURN(EmbeddingRowExchange * tables,
                   exchange.RequireCapability<EmbeddingRowExchange>());
  if (indices.empty()) {
    return TrainEmpty(lease, generation, exchange, *tables, clock);
  }
  const absl::Time compute_start = clock.Now();
  RETURN_IF_ERROR(train_.GatherBatch(indices, batch_));
  StepResult result;
  result.samples = batch_.batch;
  result.compute_seconds = SecondsSince(clock, compute_start);

  const absl::Time begin_start = clock.Now();
  ExchangeStep step;
  step.lease = &lease;
  step.generation = lease.generation() > 0 ? lease.generation() : generation;
  step.num_samples = batch_.batch;
  RETURN_IF_ERROR(exchange.BeginStep(step));
  EmbeddingRowSource* rows = tables->embedding_rows();
  if (rows == nullptr) {
    return absl::InternalError(absl::StrCat(
        "the ", exchange.mode(), " exchange gave no rows to an open step"));
  }
  result.comm_seconds = SecondsSince(clock, begin_start);

  // The row pull runs inside ForwardBackward and is counted as compute.
  const absl::Time backward_start = clock.Now();
  const ExchangeBuffers& b = buffers_.view;
  ASSIGN_OR_RETURN(CtrStepResult ctr,
                   step_->ForwardBackward(batch_, b.params, *rows, b.grads));
  if (b.host_grads != b.grads) {
    RETURN_IF_ERROR(
        backend_->CopyToHost(b.grads, b.num_elements, b.host_grads));
  } else {
    RETURN_IF_ERROR(backend_->Synchronize());
  }
  result.stats.loss_sum = ctr.loss_sum;
  result.unique_ids = ctr.unique_ids;
  result.compute_seconds += SecondsSince(clock, backward_start);

  const absl::Time finish_start = clock.Now();
  RETURN_IF_ERROR(tables->ReadyRows(ctr.rows));
  RETURN_IF_ERROR(exchange.Ready(0, b.num_elements));
  RETURN_IF_ERROR(exchange.FinishStep());
  result.comm_seconds += SecondsSince(clock, finish_start);
  return result;
}

absl::StatusOr<StepResult> CtrLeaseTrainer::TrainEmpty(
    const v1::NextTaskResponse& lease, int64_t generation,
    GradientExchange& exchange, EmbeddingRowExchange& tables, Clock& clock) {
  const absl::Time start = clock.Now();
  ExchangeStep step;
  step.lease = &lease;
  step.generation = lease.generation() > 0 ? lease.generation() : generation;
  step.num_samples = 0;
  RETURN_IF_ERROR(exchange.BeginStep(step));
  const ExchangeBuffers& b = buffers_.view;
  std::fill(b.host_grads, b.host_grads + b.num_elements, 0.0f);
  RETURN_IF_ERROR(tables.ReadyRows({}));
  RETURN_IF_ERROR(exchange.Ready(0, b.num_elements));
  RETURN_IF_ERROR(exchange.FinishStep());
  StepResult result;
  result.comm_seconds = SecondsSince(clock, start);
  return result;
}

}  // namespace ferry

#include "worker/pipeline_lease_trainer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "compute/cpu_backend.h"
#include "model/model_params.h"
#include "pipeline/in_memory_stage_link.h"
#include "pipeline/stage_runner.h"
#include "proto/job_convert.h"

namespace ferry {

std::vector<ExchangeStep::StageRing> StageRingsOf(int rank, int size,
                                                  int stages, bool state_ring) {
  std::vector<ExchangeStep::StageRing> rings;
  if (stages <= 1 || size <= stages) return rings;
  // With stage rings, a range's holders are its ring: this member's rings
  // are those that hold it.
  const std::vector<std::vector<int>> holders =
      StageHoldersOf(size, stages, state_ring);
  for (int s = 0; s < static_cast<int>(holders.size()); ++s) {
    const std::vector<int>& ranks = holders[s];
    if (std::find(ranks.begin(), ranks.end(), rank) == ranks.end()) continue;
    rings.push_back({s, ranks});
  }
  return rings;
}

std::vector<FlatRange> StageParamRanges(const ModelDef& def,
                                        const ParameterLayout& layout,
                                        const std::vector<StageRange>& split) {
  std::vector<FlatRange> ranges;
  const auto& tensors = layout.tensors();
  size_t tensor = 0;
  for (const StageRange& stage : split) {
    FlatRange range;
    range.begin = tensor < tensors.size() ? tensors[tensor].offset
                                          : layout.total_elements();
    for (int l = stage.first_layer; l < stage.end_layer; ++l) {
      tensor += LayerParamDefs(def.layers[l]).size();
    }
    range.end = tensor < tensors.size() ? tensors[tensor].offset
                                        : layout.total_elements();
    ranges.push_back(range);
  }
  return ranges;
}

absl::StatusOr<std::unique_ptr<PipelineLeaseTrainer>>
PipelineLeaseTrainer::Create(const v1::JobSpec& job, DeviceChoice device,
                             int threads, PeerEndpoint* peer,
                             absl::Duration receive_timeout) {
  auto t = std::unique_ptr<PipelineLeaseTrainer>(new PipelineLeaseTrainer());
  t->job_ = job;
  t->peer_ = peer;
  t->receive_timeout_ = receive_timeout;
  ASSIGN_OR_RETURN(t->def_, JobModel(job));
  ASSIGN_OR_RETURN(const PipelineOptions options, JobPipelineOptions(job));
  t->schedule_ = options.schedule;
  t->balance_ = options.balance;
  t->split_starts_ = options.split;
  ASSIGN_OR_RETURN(const std::vector<StageRange> split,
                   SplitModel(t->def_, job.pipeline_stages(), t->split_starts_,
                              t->balance_));
  ASSIGN_OR_RETURN(t->layout_, ModelJobLayout(t->def_));
  t->stage_ranges_ = StageParamRanges(t->def_, t->layout_, split);
  ASSIGN_OR_RETURN(const ParameterLayout params, ModelParameterLayout(t->def_));
  t->param_elements_ = params.total_elements();
  if (t->param_elements_ < t->layout_.total_elements()) {
    // BatchNorm's state: one more ring, of every member (StageRingsOf).
    t->stage_ranges_.push_back(
        {t->param_elements_, t->layout_.total_elements()});
  }
  RETURN_IF_ERROR(CheckJobTensors(job, t->layout_));
  ASSIGN_OR_RETURN(t->backend_, MakeBackend(device, threads));
  t->host_ = MakeCpuBackend(1);
  ASSIGN_OR_RETURN(t->data_, LoadTrainTest(job.dataset(), job.data_dir(),
                                           t->def_, job.seed()));
  t->lease_samples_.emplace(t->data_.train.num_samples, job.seed());
  // PS members pull their role's weights into buffers of that role's size
  // (HoldRanges); ring members hold the whole model and start from the
  // job's initial values themselves.
  t->stage_resident_ = job.mode() == v1::MODE_PS;
  if (t->stage_resident_) return t;
  const int64_t n = t->layout_.total_elements();
  ASSIGN_OR_RETURN(t->buffers_, TrainerBuffers::Allocate(t->backend_.get(), n));
  t->holding_ = true;
  t->peak_buffer_bytes_ = t->BufferBytes(n);
  ASSIGN_OR_RETURN(const std::vector<float> init,
                   JobInitialValues(job, t->def_));
  RETURN_IF_ERROR(
      t->backend_->CopyToDevice(init.data(), n, t->buffers_.view.params));
  return t;
}

absl::StatusOr<PipelineStage*> PipelineLeaseTrainer::StageFor(
    const PipelineRole& role) {
  if (stage_.has_value() && stage_role_.stage == role.stage &&
      stage_role_.stages == role.stages) {
    return &*stage_;
  }
  // A role change: the old role's stage (its activations, workspaces and
  // accumulation scratch) is dropped before the new one is built.
  stage_.reset();
  std::vector<int> starts;
  if (role.stages == job_.pipeline_stages()) starts = split_starts_;
  ASSIGN_OR_RETURN(std::vector<StageRange> split,
                   SplitModel(def_, role.stages, starts, balance_));
  ASSIGN_OR_RETURN(
      PipelineStage stage,
      PipelineStage::Create(def_, split[role.stage], backend_.get()));
  stage_.emplace(std::move(stage));
  stage_role_ = role;
  return &*stage_;
}

int64_t PipelineLeaseTrainer::BufferBytes(int64_t elements) const {
  return elements * static_cast<int64_t>(sizeof(float)) *
         (backend_->IsHostMemory() ? 2 : 4);
}

std::vector<FlatRange> PipelineLeaseTrainer::RoleRanges(
    const PipelineRole& role, const PipelineStage& stage) const {
  if (role.stages == 1) return {};  // alone: the whole model
  std::vector<FlatRange> ranges = {stage_ranges_[role.stage]};
  if (stage.state_count() > 0) ranges.push_back(StateRange(stage));
  return ranges;
}

FlatRange PipelineLeaseTrainer::StateRange(const PipelineStage& stage) const {
  const int64_t begin = param_elements_ + stage.state_offset();
  return {begin, begin + stage.state_count()};
}

absl::Status PipelineLeaseTrainer::HoldRanges(
    const std::vector<FlatRange>& ranges, GradientExchange& exchange) {
  if (!stage_resident_ || (holding_ && ranges == buffers_.view.segments)) {
    return absl::OkStatus();
  }
  exchange.AbandonStep();
  buffers_ = TrainerBuffers();  // freed before the new ones are allocated
  holding_ = false;
  int64_t n = ranges.empty() ? layout_.total_elements() : 0;
  for (const FlatRange& r : ranges) n += r.size();
  ASSIGN_OR_RETURN(buffers_, TrainerBuffers::Allocate(backend_.get(),
                                                      std::max<int64_t>(1, n)));
  buffers_.view.num_elements = n;
  buffers_.view.segments = ranges;
  holding_ = true;
  peak_buffer_bytes_ = std::max(peak_buffer_bytes_, BufferBytes(n));
  return absl::OkStatus();
}

absl::Status PipelineLeaseTrainer::LoadStageState(PipelineStage& stage) {
  if (stage.state_count() == 0) return absl::OkStatus();
  const FlatRange range = StateRange(stage);
  const int64_t at = buffers_.view.IndexOf(range.begin, range.size());
  RETURN_IF_ERROR(
      backend_->Copy(buffers_.view.params + at, range.size(), stage.state()));
  ASSIGN_OR_RETURN(state_before_, stage.GetState());
  return absl::OkStatus();
}

absl::Status PipelineLeaseTrainer::WriteStateChange(PipelineStage& stage,
                                                    int batch) {
  if (stage.state_count() == 0 || batch == 0) return absl::OkStatus();
  const FlatRange range = StateRange(stage);
  float* change = buffers_.view.host_grads +
                  buffers_.view.IndexOf(range.begin, range.size());
  ASSIGN_OR_RETURN(const std::vector<float> now, stage.GetState());
  for (int64_t i = 0; i < range.size(); ++i) {
    change[i] = (now[i] - state_before_[i]) * static_cast<float>(batch);
  }
  return absl::OkStatus();
}

absl::Status PipelineLeaseTrainer::DeclareGradient(GradientExchange& exchange) {
  const int64_t n = layout_.total_elements();
  if (buffers_.view.segments.empty()) return exchange.Ready(0, n);
  ASSIGN_OR_RETURN(PartialBufferExchange * partial,
                   exchange.RequireCapability<PartialBufferExchange>());
  // Outside the held ranges (ascending: RoleRanges) the gradient is zeros:
  // a flag each on the PS.
  int64_t next = 0;
  for (const FlatRange& r : buffers_.view.segments) {
    if (r.begin > next)
      RETURN_IF_ERROR(partial->ReadyZeros(next, r.begin - next));
    RETURN_IF_ERROR(exchange.Ready(r.begin, r.size()));
    next = r.end;
  }
  if (next < n) RETURN_IF_ERROR(partial->ReadyZeros(next, n - next));
  return absl::OkStatus();
}

absl::StatusOr<StageLink*> PipelineLeaseTrainer::LinkFor(
    const v1::NextTaskResponse& lease, const PipelineRole& role) {
  absl::MutexLock lock(&cancel_mu_);
  if (link_ != nullptr && !links_aborted_ &&
      links_generation_ == lease.ring_generation() && links_role_ == role) {
    return link_.get();
  }
  link_.reset();
  forward_.reset();
  backward_.reset();
  links_aborted_ = false;
  // The replica's members as two rings: in stage order (activations go to
  // the next rank) and reversed (gradients go to the previous stage).
  v1::NextTaskResponse forward = lease;
  v1::NextTaskResponse backward = lease;
  forward.clear_ring();
  backward.clear_ring();
  for (int s = 0; s < role.stages; ++s) {
    *forward.add_ring() = lease.ring(role.first_rank + s);
    *backward.add_ring() = lease.ring(role.first_rank + role.stages - 1 - s);
  }
  forward.set_rank(role.stage);
  backward.set_rank(role.stages - 1 - role.stage);
  ASSIGN_OR_RETURN(forward_, peer_->Connect(job_.job_id(), forward));
  ASSIGN_OR_RETURN(backward_, peer_->Connect(job_.job_id(), backward));
  link_ = std::make_unique<RingStageLink>(role.stage, role.stages,
                                          forward_.get(), backward_.get());
  links_generation_ = lease.ring_generation();
  links_role_ = role;
  return link_.get();
}

absl::StatusOr<std::vector<int64_t>> PipelineLeaseTrainer::ReplicaIndices(
    const v1::NextTaskResponse& lease, const PipelineRole& role,
    int64_t* first_position) {
  v1::NextTaskResponse replica = lease;  // alone: its own tasks
  if (role.stages > 1) {
    replica.clear_tasks();
    for (int s = 0; s < role.stages; ++s) {
      for (const v1::DataTask& t : lease.ring(role.first_rank + s).tasks()) {
        *replica.add_tasks() = t;
      }
    }
  }
  *first_position = replica.tasks_size() > 0 ? replica.tasks(0).begin() : 0;
  return lease_samples_->Indices(replica, /*allow_empty=*/true);
}

absl::StatusOr<StepResult> PipelineLeaseTrainer::Train(
    const v1::NextTaskResponse& lease, int64_t generation,
    GradientExchange& exchange, Clock& clock) {
  const int size = lease.ring_size();
  if (size == 0 || lease.rank() < 0 || lease.rank() >= size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline step ", lease.step(), ": the lease names no ring rank"));
  }
  const PipelineRole role =
      PipelineRoleOf(lease.rank(), size, job_.pipeline_stages());
  {
    absl::MutexLock lock(&cancel_mu_);
    step_fence_ = lease.fence();
  }
  const absl::Time compute_start = clock.Now();
  int64_t own = 0;
  for (const v1::DataTask& t : lease.tasks()) own += t.end() - t.begin();
  int64_t first_position = 0;
  ASSIGN_OR_RETURN(std::vector<int64_t> indices,
                   ReplicaIndices(lease, role, &first_position));
  const int batch = static_cast<int>(indices.size());
  ASSIGN_OR_RETURN(PipelineStage * stage, StageFor(role));
  const std::vector<FlatRange> ranges = RoleRanges(role, *stage);
  RETURN_IF_ERROR(HoldRanges(ranges, exchange));
  const bool stages_data = stage->is_first() || stage->is_last();
  if (batch > 0 && stages_data) {
    if (!stager_.has_value() || stager_max_ < batch) {
      stager_max_ = std::max(batch, job_.global_batch());
      ASSIGN_OR_RETURN(
          BatchStager stager,
          BatchStager::Create(host_.get(),
                              static_cast<int>(ShapeElements(def_.input.shape)),
                              stager_max_));
      stager_.emplace(std::move(stager));
    }
    RETURN_IF_ERROR(stager_->Stage(data_.train, indices));
  }
  StepResult result;
  result.samples = own;
  result.compute_seconds = SecondsSince(clock, compute_start);

  const absl::Time begin_start = clock.Now();
  ExchangeStep step;
  step.lease = &lease;
  step.generation = lease.generation() > 0 ? lease.generation() : generation;
  step.num_samples = own;
  // A stage computes with its own layers only: PS pulls just those.
  step.pull_ranges = ranges;
  if (stage_resident_) step.buffers = &buffers_.view;
  step.stage_ranges = stage_ranges_;
  const bool state_ring = param_elements_ < layout_.total_elements();
  step.stage_rings =
      StageRingsOf(lease.rank(), size, job_.pipeline_stages(), state_ring);
  step.stage_holders = StageHoldersOf(size, job_.pipeline_stages(), state_ring);
  RETURN_IF_ERROR(exchange.BeginStep(step));
  result.comm_seconds = SecondsSince(clock, begin_start);
  RETURN_IF_ERROR(LoadStageState(*stage));

  const absl::Time backward_start = clock.Now();
  const int64_t held = buffers_.view.num_elements;
  RETURN_IF_ERROR(backend_->Fill(0.0f, held, buffers_.view.grads));
  if (batch > 0) {
    InMemoryStageHub alone(1);
    StageLink* link = &alone.Link(0);
    if (role.stages > 1) {
      ASSIGN_OR_RETURN(link, LinkFor(lease, role));
    }
    StageStepInput in;
    in.step = lease.step();
    in.context =
        EpochPositionContext(job_.seed(), lease.epoch(), first_position);
    in.batch = batch;
    in.micro_batches = std::min(std::max(1, job_.micro_batches()), batch);
    in.schedule = schedule_;
    const int input_dim = static_cast<int>(ShapeElements(def_.input.shape));
    if (stage->is_first()) {
      in.inputs = absl::MakeConstSpan(stager_->inputs(),
                                      static_cast<size_t>(batch) * input_dim);
    }
    if (stage->is_last())
      in.labels = absl::MakeConstSpan(stager_->labels(), batch);
    in.grad_scale = 1.0f;  // the exchange divides by the step's samples
    in.receive_timeout = receive_timeout_;
    // Where the buffers hold the stage's layers.
    const int64_t at =
        buffers_.view.IndexOf(stage->param_offset(), stage->param_count());
    ASSIGN_OR_RETURN(StageStepResult r,
                     RunStageStep(*stage, role.stage, role.stages, *link,
                                  buffers_.view.params + at,
                                  buffers_.view.grads + at, in, clock));
    if (stage->is_last()) result.stats = r.loss;
    result.pipeline = RecordFigures(role, r);
  }
  if (!backend_->IsHostMemory()) {
    RETURN_IF_ERROR(backend_->CopyToHost(buffers_.view.grads, held,
                                         buffers_.view.host_grads));
  }
  RETURN_IF_ERROR(WriteStateChange(*stage, batch));
  RETURN_IF_ERROR(DeclareGradient(exchange));
  result.compute_seconds += SecondsSince(clock, backward_start);
  const absl::Time finish_start = clock.Now();
  RETURN_IF_ERROR(exchange.FinishStep());
  result.comm_seconds += SecondsSince(clock, finish_start);
  return result;
}

v1::PipelineStepFigures PipelineLeaseTrainer::RecordFigures(
    const PipelineRole& role, const StageStepResult& r) {
  v1::PipelineStepFigures figures;
  figures.set_stage(role.stage);
  figures.set_stages(role.stages);
  figures.set_busy_seconds(r.busy_seconds);
  figures.set_wait_seconds(r.wait_seconds);
  figures.set_step_seconds(r.step_seconds);
  figures.set_activation_bytes(r.activation_bytes);
  figures.set_neighbour_bytes_sent(r.bytes_sent);
  figures.set_neighbour_bytes_received(r.bytes_received);
  ++steps_by_role_[role.stages == 1 ? std::string("alone")
                                    : absl::StrCat("stage ", role.stage, " of ",
                                                   role.stages)];
  busy_seconds_ += r.busy_seconds;
  wait_seconds_ += r.wait_seconds;
  stage_seconds_ += r.step_seconds;
  peak_activation_bytes_ = std::max(peak_activation_bytes_, r.activation_bytes);
  neighbour_bytes_sent_ += r.bytes_sent;
  neighbour_bytes_received_ += r.bytes_received;
  return figures;
}

void PipelineLeaseTrainer::CancelIfOlder(int64_t fence) {
  absl::MutexLock lock(&cancel_mu_);
  if (step_fence_ >= fence || forward_ == nullptr || links_aborted_) return;
  LogWarn("the coordinator aborted the pipeline step: giving it up",
          {{"fence", fence}});
  forward_->Abort();
  backward_->Abort();
  links_aborted_ = true;
}

nlohmann::json PipelineLeaseTrainer::SummaryJson() const {
  const nlohmann::json figures = {
      {"stages", job_.pipeline_stages()},
      {"micro_batches", job_.micro_batches()},
      {"schedule", PipelineScheduleName(schedule_)},
      {"steps_by_role", steps_by_role_},
      {"busy_seconds", busy_seconds_},
      {"wait_seconds", wait_seconds_},
      {"idle_share", stage_seconds_ > 0
                         ? std::max(0.0, 1.0 - busy_seconds_ / stage_seconds_)
                         : 0.0},
      {"peak_activation_bytes", peak_activation_bytes_},
      {"peak_buffer_bytes", peak_buffer_bytes_},
      {"neighbour_bytes_sent", neighbour_bytes_sent_},
      {"neighbour_bytes_received", neighbour_bytes_received_}};
  return {{"pipeline", figures}};
}

}  // namespace ferry

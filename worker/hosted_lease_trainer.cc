#include "worker/hosted_lease_trainer.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/finite_scale.h"
#include "common/status_macros.h"
#include "common/step_trace.h"
#include "coordinator/coordinator_client.h"
#include "proto/job_convert.h"

namespace ferry {

namespace {

// The job's starting flat buffer: the coordinator's copy of the defining
// worker's values for a job whose model is a worker's, else drawn or read
// as every process of the job does.
absl::StatusOr<std::vector<float>> StartingValues(
    const v1::JobSpec& job, const std::string& coordinator, int64_t n) {
  if (!job.model_from_worker()) return JobDenseInitialValues(job);
  CoordinatorClientOptions options;
  options.retry.budget = absl::Seconds(60);
  return CoordinatorClient::Connect(coordinator, options)
      ->ModelValues(job.job_id(), 0, n);
}

}  // namespace

absl::StatusOr<std::shared_ptr<HostedBuffers>> HostedBuffers::ForJob(
    const v1::JobSpec& job, const std::string& coordinator) {
  auto b = std::make_shared<HostedBuffers>();
  ASSIGN_OR_RETURN(b->layout, JobDenseLayout(job));
  ASSIGN_OR_RETURN(b->backend, MakeBackend(DeviceChoice::kCpu, 1));
  const int64_t n = b->layout.total_elements();
  ASSIGN_OR_RETURN(const int64_t state_elements, JobStateElements(job));
  b->trainable_end = n - state_elements;
  b->absent_allowed = job.model_from_worker();
  if (job.mode() == v1::MODE_RING) {
    ASSIGN_OR_RETURN(b->params, StartingValues(job, coordinator, n));
    if (static_cast<int64_t>(b->params.size()) != n) {
      return absl::InternalError(absl::StrCat("the job's initial values hold ",
                                              b->params.size(),
                                              " elements, its tensors ", n));
    }
  } else {
    b->params.assign(n, 0.0f);
  }
  b->grads.assign(n, 0.0f);
  b->view.num_elements = n;
  b->view.params = b->params.data();
  b->view.host_params = b->params.data();
  // PS pulls (ahead, too) land in staging; the ring writes its members'
  // weights (a broadcast, the update) only while the host waits.
  if (job.mode() == v1::MODE_PS) {
    b->staging.assign(n, 0.0f);
    b->view.host_params = b->staging.data();
  }
  b->view.grads = b->grads.data();
  b->view.host_grads = b->grads.data();
  return b;
}

HostedLeaseTrainer::HostedLeaseTrainer(const v1::JobSpec& job,
                                       std::shared_ptr<HostedBuffers> buffers,
                                       HostStepChannel* channel)
    : buffers_(std::move(buffers)), seed_(job.seed()), channel_(channel) {}

void HostedLeaseTrainer::StepReported() {
  if (unanswered_ == nullptr) return;
  auto* weights = unanswered_->capability<StepWeightsExchange>();
  unanswered_ = nullptr;
  if (weights != nullptr && weights->AwaitStepWeights()) ShowStagedWeights();
  channel_->Complete(true);
}

absl::StatusOr<StepResult> HostedLeaseTrainer::Train(
    const v1::NextTaskResponse& lease, int64_t generation,
    GradientExchange& exchange, Clock& clock) {
  StepReported();  // a step the loop did not report: answered now
  ASSIGN_OR_RETURN(const int64_t train_samples, channel_->WaitForHost());
  if (!samples_.has_value() || train_samples != train_samples_) {
    train_samples_ = train_samples;
    samples_.emplace(train_samples, seed_);
  }
  ASSIGN_OR_RETURN(
      std::vector<int64_t> indices,
      samples_->Indices(lease, exchange.policy().allow_empty_batch));
  StepResult result;
  result.samples = static_cast<int64_t>(indices.size());
  const absl::Time begin = clock.Now();
  RETURN_IF_ERROR(exchange.BeginStep(ExchangeStep::Of(
      &lease, lease.generation() > 0 ? lease.generation() : generation,
      result.samples)));
  // BeginStep left the step's weights in params (GradientExchange's
  // contract: the PS exchange copies its staging there once the pull is
  // in), so the host computes on them without another copy.
  StepTrace::Record(StepEvent::kBegun, lease.step());
  result.comm_seconds = SecondsSince(clock, begin);
  if (indices.empty()) {
    RETURN_IF_ERROR(ContributeZeros(exchange));
    return result;
  }
  std::fill(buffers_->grads.begin(), buffers_->grads.end(), 0.0f);
  const absl::Time offered = clock.Now();
  channel_->Offer(HostLease{.step = lease.step(),
                            .epoch = lease.epoch(),
                            .samples = std::move(indices)});
  RETURN_IF_ERROR(RunHostStep(exchange, result.samples, clock, result));
  // The host's compute and the exchange's calls overlap: the wait in
  // FinishStep is what RunHostStep timed as communication.
  result.compute_seconds =
      std::max(0.0, SecondsSince(clock, offered) - result.comm_seconds);
  return result;
}

absl::Status HostedLeaseTrainer::Evaluate(const v1::NextTaskResponse& task,
                                          GradientExchange& exchange) {
  if (!task.has_evaluate()) {
    return absl::InvalidArgumentError("an EVALUATE task without its EvalTask");
  }
  RETURN_IF_ERROR(channel_->WaitForHost().status());
  // Exchanges that leave the weights on the far side (PS) bring them;
  // the others (ring) hold them in params already.
  if (exchange.capability<StepWeightsExchange>() != nullptr) {
    ASSIGN_OR_RETURN(const std::vector<float> weights, exchange.FinalWeights());
    if (weights.size() != buffers_->params.size()) {
      return absl::InternalError(
          absl::StrCat("the final weights hold ", weights.size(),
                       " elements, the model ", buffers_->params.size()));
    }
    std::copy(weights.begin(), weights.end(), buffers_->params.begin());
  }
  channel_->Offer(
      HostLease{.step = task.step(),
                .epoch = task.epoch(),
                .evaluate = HostEvalTask{.version = task.evaluate().version(),
                                         .epoch = task.evaluate().epoch(),
                                         .final = task.evaluate().final()}});
  ASSIGN_OR_RETURN(evaluation_, channel_->AwaitEvaluation());
  return absl::OkStatus();
}

std::optional<v1::WorkerEvaluation> HostedLeaseTrainer::TakeEvaluation() {
  if (!evaluation_.has_value()) return std::nullopt;
  v1::WorkerEvaluation out;
  out.set_version(evaluation_->task.version);
  out.set_epoch(evaluation_->task.epoch);
  out.set_final(evaluation_->task.final);
  out.set_accuracy(evaluation_->accuracy);
  out.set_loss(evaluation_->loss);
  out.set_duration_seconds(evaluation_->duration_seconds);
  evaluation_.reset();
  return out;
}

absl::Status HostedLeaseTrainer::RunHostStep(GradientExchange& exchange,
                                             int64_t samples, Clock& clock,
                                             StepResult& result) {
  absl::Status failure;
  bool refused = false;  // the host's gradient, not the exchange, failed
  float* grads = buffers_->view.host_grads;
  const int64_t n = buffers_->view.num_elements;
  const float scale = static_cast<float>(samples);
  while (true) {
    absl::StatusOr<HostEvent> event = channel_->TakeEvent();
    if (!event.ok()) return event.status();  // the host left
    if (event->kind == HostEvent::Kind::kFinish) {
      result.stats.loss_sum = event->loss_sum;
      result.stats.correct = event->correct;
      break;
    }
    if (!failure.ok()) continue;
    if (event->offset < 0 || event->length < 0 || event->offset > n ||
        event->length > n - event->offset) {
      failure = absl::InvalidArgumentError(
          absl::StrCat("gradient range [", event->offset, ", ",
                       event->offset + event->length,
                       ") is outside the model's ", n, " elements"));
      refused = true;
      continue;
    }
    float* range = grads + event->offset;
    if (const int64_t bad = ScaleIfFinite(range, event->length, scale);
        bad >= 0) {
      failure = NotFinite(event->offset + bad, range[bad]);
      refused = true;
      continue;
    }
    if (event->absent) {
      if (absl::Status bad = CheckAbsent(*event); !bad.ok()) {
        failure = std::move(bad);
        refused = true;
        continue;
      }
      auto* absent = exchange.capability<AbsentGradientExchange>();
      if (absent != nullptr) {
        failure = absent->ReadyAbsent(event->offset, event->length);
        continue;
      }
    }
    failure = exchange.Ready(event->offset, event->length);
  }
  if (failure.ok()) {
    const absl::Time finish = clock.Now();
    StepTrace::Record(StepEvent::kComputed, StepTrace::kUnknownStep);
    failure = exchange.FinishStep();
    StepTrace::Record(StepEvent::kFinished, StepTrace::kUnknownStep);
    result.comm_seconds += SecondsSince(clock, finish);
  }
  if (failure.ok()) {
    unanswered_ = &exchange;  // StepReported answers, after the report
  } else if (refused) {
    channel_->Complete(failure);
  } else {
    channel_->Complete(false);
  }
  return failure;
}

absl::Status HostedLeaseTrainer::NotFinite(int64_t index, float value) const {
  std::string tensor = "the model";
  for (const TensorSlot& t : buffers_->layout.tensors()) {
    if (index >= t.offset && index < t.offset + t.numel) {
      tensor = absl::StrCat(t.name, "[", index - t.offset, "]");
      break;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("the gradient of ", tensor, " is ", value,
                   ": the step is refused and nothing of it is applied"));
}

void HostedLeaseTrainer::ShowStagedWeights() {
  if (buffers_->view.host_params == buffers_->view.params) return;
  std::copy(buffers_->staging.begin(), buffers_->staging.end(),
            buffers_->params.begin());
}

absl::Status HostedLeaseTrainer::CheckAbsent(const HostEvent& event) const {
  if (!buffers_->absent_allowed) {
    return absl::InvalidArgumentError(
        "gradient ranges can be declared absent only in a job whose model "
        "its workers define (--model external)");
  }
  if (event.offset + event.length > buffers_->trainable_end) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gradient range [", event.offset, ", ", event.offset + event.length,
        ") is declared absent but reaches the model's buffers (from element ",
        buffers_->trainable_end, "): only parameters can be absent"));
  }
  const float* grads = buffers_->view.host_grads + event.offset;
  for (int64_t i = 0; i < event.length; ++i) {
    if (grads[i] != 0.0f) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gradient range [", event.offset, ", ", event.offset + event.length,
          ") is declared absent but element ", event.offset + i, " holds ",
          grads[i], ", not 0"));
    }
  }
  return absl::OkStatus();
}

absl::Status HostedLeaseTrainer::ContributeZeros(GradientExchange& exchange) {
  std::fill(buffers_->grads.begin(), buffers_->grads.end(), 0.0f);
  const int64_t n = buffers_->view.num_elements;
  const int64_t params = buffers_->trainable_end;
  auto* absent = buffers_->absent_allowed
                     ? exchange.capability<AbsentGradientExchange>()
                     : nullptr;
  if (absent != nullptr && params > 0) {
    RETURN_IF_ERROR(absent->ReadyAbsent(0, params));
    if (n > params) RETURN_IF_ERROR(exchange.Ready(params, n - params));
  } else {
    RETURN_IF_ERROR(exchange.Ready(0, n));
  }
  return exchange.FinishStep();
}

}  // namespace ferry

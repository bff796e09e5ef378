#include "worker/ps_exchange.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ferry {

ExchangePolicy PipelinePsPolicy() {
  ExchangePolicy policy;
  policy.fenced = true;
  policy.report_failed_steps = true;
  policy.backoff_after_failure = true;
  return policy;
}

PsExchange::PsExchange(std::unique_ptr<ParameterClient> client,
                       ComputeBackend* backend, ExchangeBuffers buffers,
                       absl::Duration shard_check_timeout,
                       bool embedding_tables, ExchangePolicy policy)
    : client_(std::move(client)),
      backend_(backend),
      buffers_(buffers),
      shard_check_timeout_(shard_check_timeout),
      embedding_tables_(embedding_tables),
      policy_(policy),
      row_source_(client_.get()) {}

absl::StatusOr<int64_t> PsExchange::PullVersion(int64_t min_version,
                                                FlatRange range, float* into) {
  if (ahead_ != nullptr && ahead_version_ == min_version &&
      ahead_range_ == range && ahead_into_ == into) {
    absl::StatusOr<int64_t> pulled = ahead_->Wait();
    ahead_.reset();
    if (pulled.ok()) return pulled;
    // A shard failed or was rolled back meanwhile: pull with retries.
  }
  ahead_.reset();  // another version: cancelled, nothing writes any more
  return client_->Pull(min_version, into);
}

absl::Status PsExchange::BeginStep(const ExchangeStep& step) {
  push_.reset();
  const v1::NextTaskResponse& lease = *step.lease;
  const ExchangeBuffers& b = step.buffers != nullptr ? *step.buffers : buffers_;
  // The range pulled, and where it lands: the buffers must hold it.
  const FlatRange range = step.pull_range.end == 0
                              ? FlatRange{0, client_->num_elements()}
                              : step.pull_range;
  if (range.begin < b.first_element || range.begin > range.end ||
      range.end > b.first_element + b.num_elements) {
    ahead_.reset();
    return absl::InvalidArgumentError(absl::StrCat(
        "PS step ", lease.step(), ": the buffers hold [", b.first_element, ", ",
        b.first_element + b.num_elements, "), not the pulled range [",
        range.begin, ", ", range.end, ")"));
  }
  step_buffers_ = b;
  const int64_t at = range.begin - b.first_element;
  // A shard rolled back or fenced past this lease refuses its waits at once.
  client_->SetPullGeneration(step.generation);
  client_->SetPullRange(step.pull_range);
  ASSIGN_OR_RETURN(
      const int64_t version,
      PullVersion(lease.pull_version(), step.pull_range, b.host_params + at));
  if (b.host_params != b.params) {
    RETURN_IF_ERROR(backend_->CopyToDevice(b.host_params + at, range.size(),
                                           b.params + at));
  }
  PushInfo info;
  info.generation = step.generation;
  info.step = lease.step();
  info.num_samples = step.num_samples;
  info.base_version = version;
  info.with_rows = embedding_tables_;
  row_source_.set_min_version(version);
  for (const v1::Contributor& c : lease.step_contributors()) {
    info.step_contributors.push_back({c.worker_id(), c.num_samples()});
  }
  ASSIGN_OR_RETURN(push_, client_->BeginPush(info));
  if (!info.step_contributors.empty()) {
    absl::StatusOr<std::unique_ptr<PendingPull>> ahead =
        client_->StartPull(lease.step() + 1, b.host_params + at);
    if (ahead.ok()) {
      ahead_ = *std::move(ahead);
      ahead_version_ = lease.step() + 1;
      ahead_range_ = step.pull_range;
      ahead_into_ = b.host_params + at;
    }
  }
  return absl::OkStatus();
}

absl::Status PsExchange::Ready(int64_t offset, int64_t length) {
  if (push_ == nullptr) {
    return absl::FailedPreconditionError("no PS step begun");
  }
  const ExchangeBuffers& b = step_buffers_;
  if (offset < b.first_element || length < 0 ||
      offset + length > b.first_element + b.num_elements) {
    return absl::InvalidArgumentError(
        absl::StrCat("gradient range [", offset, ", ", offset + length,
                     ") is outside the step's buffers [", b.first_element, ", ",
                     b.first_element + b.num_elements, ")"));
  }
  return push_->Ready(offset, length,
                      b.host_grads + (offset - b.first_element));
}

absl::Status PsExchange::ReadyZeros(int64_t offset, int64_t length) {
  if (push_ == nullptr) {
    return absl::FailedPreconditionError("no PS step begun");
  }
  return push_->ReadyZeros(offset, length);
}

EmbeddingRowSource* PsExchange::embedding_rows() {
  return embedding_tables_ ? &row_source_ : nullptr;
}

absl::Status PsExchange::ReadyRows(const std::vector<SparseRows>& rows) {
  if (!embedding_tables_) return GradientExchange::ReadyRows(rows);
  if (push_ == nullptr) {
    return absl::FailedPreconditionError("no PS step begun");
  }
  return push_->AddRows(rows);
}

absl::Status PsExchange::FinishStep() {
  if (push_ == nullptr) {
    return absl::FailedPreconditionError("no PS step begun");
  }
  const absl::Status finished = push_->Finish();
  push_.reset();
  if (!finished.ok()) ahead_.reset();  // the version may never come
  return finished;
}

bool PsExchange::WaitedForOthers(const absl::Status& failure) {
  return absl::IsDeadlineExceeded(failure) &&
         client_->CheckShards(shard_check_timeout_).ok();
}

absl::Status PsExchange::AddToReport(v1::StepReport& report) {
  AddRoleBytes("ps", client_->bytes(), report.mutable_bytes());
  for (const auto& [peer, bytes] : client_->peer_bytes()) {
    AddRoleBytes(peer, bytes, report.mutable_peer_bytes());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> PsExchange::FinalWeights() {
  std::vector<float> host(client_->num_elements());
  client_->SetPullRange({});
  RETURN_IF_ERROR(client_->Pull(0, host.data()).status());
  return host;
}

}  // namespace ferry

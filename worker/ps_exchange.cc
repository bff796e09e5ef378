#include "worker/ps_exchange.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ferry {

ExchangePolicy PipelinePsPolicy() {
  ExchangePolicy policy;
  policy.allow_empty_batch = true;  // a stage of a replica with samples
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
  const bool same = ahead_version_ == min_version && ahead_range_ == range &&
                    ahead_into_ == into;
  if (ahead_ != nullptr && same) ahead_done_ = ahead_->Wait();
  ahead_.reset();  // another version: cancelled, nothing writes any more
  std::optional<absl::StatusOr<int64_t>> done = std::move(ahead_done_);
  ahead_done_.reset();
  if (done.has_value() && same && done->ok()) return *done;
  // None started, another version, or a shard failed or was rolled back
  // meanwhile: pull with retries.
  return client_->Pull(min_version, into);
}

absl::Status PsExchange::BeginStep(const ExchangeStep& step) {
  push_.reset();
  const v1::NextTaskResponse& lease = *step.lease;
  const ExchangeBuffers& b = step.buffers != nullptr ? *step.buffers : buffers_;
  // The ranges pulled ({0, 0}: the whole buffer) and where each lands in
  // the buffers, which must hold it.
  std::vector<FlatRange> ranges = step.pull_ranges;
  if (ranges.empty()) ranges.push_back({});
  std::vector<float*> into;
  for (const FlatRange& r : ranges) {
    const FlatRange flat =
        r.end == 0 ? FlatRange{0, client_->num_elements()} : r;
    const int64_t at = b.IndexOf(flat.begin, flat.size());
    if (at < 0) {
      ahead_.reset();
      return absl::InvalidArgumentError(
          absl::StrCat("PS step ", lease.step(),
                       ": the step's buffers do not hold the "
                       "pulled range [",
                       flat.begin, ", ", flat.end, ")"));
    }
    into.push_back(b.host_params + at);
  }
  step_buffers_ = b;
  const int64_t min_version = lease.pull_version();
  // A shard rolled back or fenced past this lease refuses its waits at once.
  client_->SetPullGeneration(step.generation);
  // The ranges after the first (a stage's state) are started first, so that
  // the step waits for the version once; the first may come from the pull
  // started ahead.
  std::vector<std::unique_ptr<PendingPull>> beside(ranges.size());
  for (size_t k = 1; k < ranges.size(); ++k) {
    client_->SetPullRange(ranges[k]);
    auto started = client_->StartPull(min_version, into[k]);
    if (started.ok()) beside[k] = *std::move(started);
  }
  client_->SetPullRange(ranges[0]);
  ASSIGN_OR_RETURN(int64_t version,
                   PullVersion(min_version, ranges[0], into[0]));
  for (size_t k = 1; k < ranges.size(); ++k) {
    absl::StatusOr<int64_t> pulled =
        beside[k] != nullptr ? beside[k]->Wait()
                             : absl::UnavailableError("not started");
    if (!pulled.ok()) {  // not started, or failed: pulled with retries
      client_->SetPullRange(ranges[k]);
      pulled = client_->Pull(min_version, into[k]);
    }
    RETURN_IF_ERROR(pulled.status());
    version = std::min(version, *pulled);
  }
  if (b.host_params != b.params) {
    for (size_t k = 0; k < ranges.size(); ++k) {
      const int64_t n =
          ranges[k].end == 0 ? client_->num_elements() : ranges[k].size();
      RETURN_IF_ERROR(backend_->CopyToDevice(
          into[k], n, b.params + (into[k] - b.host_params)));
    }
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
    client_->SetPullRange(ranges[0]);
    absl::StatusOr<std::unique_ptr<PendingPull>> ahead =
        client_->StartPull(lease.step() + 1, into[0]);
    if (ahead.ok()) {
      ahead_ = *std::move(ahead);
      ahead_version_ = lease.step() + 1;
      ahead_range_ = ranges[0];
      ahead_into_ = into[0];
    }
  }
  return absl::OkStatus();
}

absl::Status PsExchange::Ready(int64_t offset, int64_t length) {
  if (push_ == nullptr) {
    return absl::FailedPreconditionError("no PS step begun");
  }
  const int64_t at = step_buffers_.IndexOf(offset, length);
  if (at < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("gradient range [", offset, ", ", offset + length,
                     ") is not held by the step's buffers"));
  }
  return push_->Ready(offset, length, step_buffers_.host_grads + at);
}

absl::Status PsExchange::ReadyZeros(int64_t offset, int64_t length) {
  if (push_ == nullptr) {
    return absl::FailedPreconditionError("no PS step begun");
  }
  return push_->ReadyZeros(offset, length);
}

absl::Status PsExchange::ReadyAbsent(int64_t offset, int64_t length) {
  if (push_ == nullptr) {
    return absl::FailedPreconditionError("no PS step begun");
  }
  return push_->ReadyAbsent(offset, length);
}

ExchangeCapability* PsExchange::FindCapability(std::string_view name) {
  if (ExchangeCapability* c = Offer<PartialBufferExchange>(this, name)) {
    return c;
  }
  if (ExchangeCapability* c = Offer<AbsentGradientExchange>(this, name)) {
    return c;
  }
  if (ExchangeCapability* c = Offer<StepWeightsExchange>(this, name)) {
    return c;
  }
  return embedding_tables_ ? Offer<EmbeddingRowExchange>(this, name) : nullptr;
}

EmbeddingRowSource* PsExchange::embedding_rows() {
  return embedding_tables_ ? &row_source_ : nullptr;
}

absl::Status PsExchange::ReadyRows(const std::vector<SparseRows>& rows) {
  if (!embedding_tables_) {
    return absl::UnimplementedError("this PS job has no embedding tables");
  }
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

bool PsExchange::AwaitStepWeights() {
  if (ahead_ == nullptr) return ahead_done_.has_value() && ahead_done_->ok();
  ahead_done_ = ahead_->Wait();
  ahead_.reset();
  return ahead_done_->ok();
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

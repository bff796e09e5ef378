#include "worker/hybrid_exchange.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace ferry {

HybridExchange::HybridExchange(std::unique_ptr<RingExchange> ring,
                               std::unique_ptr<ParameterClient> rows)
    : ring_(std::move(ring)),
      rows_(std::move(rows)),
      row_source_(rows_.get()) {}

absl::Status HybridExchange::BeginStep(const ExchangeStep& step) {
  push_.reset();
  step_open_ = false;
  const v1::NextTaskResponse& lease = *step.lease;
  if (lease.pull_version() < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("hybrid lease for step %d pulls version %d",
                        lease.step(), lease.pull_version()));
  }
  RETURN_IF_ERROR(ring_->BeginStep(step));
  rows_->SetPullGeneration(step.generation);
  row_source_.set_min_version(lease.pull_version());
  push_info_ = PushInfo{};
  push_info_.generation = step.generation;
  push_info_.step = lease.step();
  push_info_.num_samples = step.num_samples;
  push_info_.base_version = lease.pull_version();
  push_info_.with_rows = true;
  // Sent at ReadyRows, committed only by FinishStep once the dense
  // all-reduce succeeded: when the lease names the step's contributors,
  // the last commit applies the step on the shard (finalize on push).
  push_info_.commit_at_finish = true;
  for (const v1::Contributor& c : lease.step_contributors()) {
    push_info_.step_contributors.push_back({c.worker_id(), c.num_samples()});
  }
  step_open_ = true;
  rows_declared_ = false;
  return absl::OkStatus();
}

EmbeddingRowSource* HybridExchange::embedding_rows() {
  return step_open_ ? &row_source_ : nullptr;
}

absl::Status HybridExchange::ReadyRows(const std::vector<SparseRows>& rows) {
  if (!step_open_) {
    return absl::FailedPreconditionError("hybrid: no step begun");
  }
  if (rows_declared_) {
    return absl::FailedPreconditionError(
        "hybrid: the step's rows were declared already");
  }
  rows_declared_ = true;
  if (push_info_.num_samples == 0) {
    for (const SparseRows& part : rows) {
      if (!part.ids.empty()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "hybrid: rows of table %d in a step without samples", part.table));
      }
    }
    return absl::OkStatus();  // a member without samples pushes nothing
  }
  ASSIGN_OR_RETURN(push_, rows_->BeginPush(push_info_));
  return push_->AddRows(rows);
}

absl::Status HybridExchange::FinishStep() {
  if (!step_open_) {
    return absl::FailedPreconditionError("hybrid: no step begun");
  }
  if (!rows_declared_ && push_info_.num_samples > 0) {
    AbandonStep();
    return absl::FailedPreconditionError(
        "hybrid: the step's embedding rows were never declared");
  }
  step_open_ = false;
  if (absl::Status reduced = ring_->FinishStep(); !reduced.ok()) {
    push_.reset();  // cancels the rows' streams: the shards keep nothing
    return reduced;
  }
  if (push_ == nullptr) return absl::OkStatus();
  absl::Status pushed = push_->Finish();
  push_.reset();
  return pushed;
}

void HybridExchange::AbandonStep() {
  step_open_ = false;
  push_.reset();
  ring_->AbandonStep();
}

absl::Status HybridExchange::AddToReport(v1::StepReport& report) {
  RETURN_IF_ERROR(ring_->AddToReport(report));
  AddRoleBytes("ps", rows_->bytes(), report.mutable_bytes());
  for (const auto& [peer, bytes] : rows_->peer_bytes()) {
    AddRoleBytes(peer, bytes, report.mutable_peer_bytes());
  }
  return absl::OkStatus();
}

}  // namespace ferry

// PsShard: exporting and restoring the state (checkpoints, rollback,
// shutdown). The rest of the class is in ps_shard.cc.
#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "ps/ps_shard.h"

namespace ferry {
namespace {

// Index of the first non-finite value, or -1.
int64_t FirstNonFinite(const std::vector<float>& values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) return static_cast<int64_t>(i);
  }
  return -1;
}

}  // namespace

absl::Status PsShard::StoppedError() const {
  return absl::UnavailableError(
      absl::StrFormat("shard %d is shutting down: it applies no more updates",
                      config_.shard_id));
}

absl::Status PsShard::VisitLocked(const StateVisitor& visit) {
  mu_.AssertHeld();
  PsShardStateView view;
  view.version = version_;
  view.optimizer_steps = optimizer_.steps_applied();
  view.params = current_->values;
  const bool in_place = backend_->IsHostMemory();
  for (DeviceBuffer* buffer : optimizer_.StateBuffers()) {
    if (in_place) {
      view.optimizer_state.emplace_back(buffer->data(), buffer->size());
      continue;
    }
    std::vector<float>& host = view.host_copies.emplace_back(buffer->size());
    const absl::Status status =
        backend_->CopyToHost(buffer->data(), buffer->size(), host.data());
    if (!status.ok()) {
      return absl::InternalError(
          absl::StrFormat("shard %d: cannot copy the optimizer state: %s",
                          config_.shard_id, status.ToString()));
    }
    view.optimizer_state.emplace_back(host);
  }
  view.sparse = sparse_.get();
  return visit(view);
}

absl::StatusOr<PsShardState> PsShard::ExportLocked() {
  mu_.AssertHeld();
  PsShardState state;
  RETURN_IF_ERROR(VisitLocked([&](const PsShardStateView& view) {
    state.version = view.version;
    state.optimizer_steps = view.optimizer_steps;
    state.params.assign(view.params.begin(), view.params.end());
    for (absl::Span<const float> buffer : view.optimizer_state) {
      state.optimizer_state.emplace_back(buffer.begin(), buffer.end());
    }
    if (view.sparse != nullptr) state.tables = view.sparse->Export();
    return absl::OkStatus();
  }));
  return state;
}

absl::Status PsShard::CheckVersionLocked(int64_t expected_version) const {
  mu_.AssertHeld();
  if (expected_version >= 0 && expected_version != version_) {
    return absl::FailedPreconditionError(
        absl::StrFormat("shard %d is at version %d, not %d", config_.shard_id,
                        version_, expected_version));
  }
  return absl::OkStatus();
}

absl::StatusOr<PsShardState> PsShard::ExportState(int64_t expected_version) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckVersionLocked(expected_version));
  return ExportLocked();
}

absl::StatusOr<PsShardState> PsShard::StopUpdates() {
  absl::MutexLock lock(&mu_);
  updates_stopped_ = true;
  return ExportLocked();
}

absl::Status PsShard::VisitState(int64_t expected_version,
                                 const StateVisitor& visit) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckVersionLocked(expected_version));
  return VisitLocked(visit);
}

absl::Status PsShard::StopUpdatesAndVisit(const StateVisitor& visit) {
  absl::MutexLock lock(&mu_);
  updates_stopped_ = true;
  return VisitLocked(visit);
}

absl::Status PsShard::CheckStateLocked(const PsShardState& state) {
  mu_.AssertHeld();
  if (state.version < 0 || state.optimizer_steps < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "state of version %d with %d optimizer steps: must not be negative",
        state.version, state.optimizer_steps));
  }
  const size_t n = static_cast<size_t>(range_.size());
  if (state.params.size() != n) {
    return absl::FailedPreconditionError(
        absl::StrFormat("state holds %d parameters, shard %d owns %d",
                        state.params.size(), config_.shard_id, n));
  }
  const size_t buffers = optimizer_.StateBuffers().size();
  if (state.optimizer_state.size() != buffers) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "state holds %d optimizer buffers, shard %d's optimizer keeps %d",
        state.optimizer_state.size(), config_.shard_id, buffers));
  }
  for (size_t b = 0; b < buffers; ++b) {
    if (state.optimizer_state[b].size() != n) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "optimizer buffer %d holds %d elements, shard %d owns %d", b,
          state.optimizer_state[b].size(), config_.shard_id, n));
    }
  }
  if (const int64_t i = FirstNonFinite(state.params); i >= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("state: parameter %d is not finite", i));
  }
  for (size_t b = 0; b < buffers; ++b) {
    if (const int64_t i = FirstNonFinite(state.optimizer_state[b]); i >= 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "state: optimizer buffer %d element %d is not finite", b, i));
    }
  }
  return absl::OkStatus();
}

void PsShard::RollBackLocked(int64_t generation,
                             std::vector<ReadyCallback>& aborted) {
  mu_.AssertHeld();
  for (auto& [worker, contribution] : pending_) {
    RecycleGradBuffer(std::move(contribution.grad));
  }
  pending_.clear();
  last_step_.clear();
  // Steps at or after the version kept were not applied to it.
  applied_sets_.erase(applied_sets_.lower_bound(version_), applied_sets_.end());
  ++rollbacks_;  // pushes begun before now can no longer commit
  {
    absl::MutexLock sum_lock(&sum_mu_);
    arrival_rollbacks_ = rollbacks_;  // nor sum another chunk
    if (arrival_ != nullptr) arrival_->Reset(version_);
  }
  max_generation_ = std::max(max_generation_, generation);
  for (auto& [id, waiter] : waiters_)
    aborted.push_back(std::move(waiter.ready));
  waiters_.clear();
}

absl::Status PsShard::RestoreState(const PsShardState& state,
                                   int64_t generation) {
  return RestoreFrom(state, ViewsOf(state.tables), generation, nullptr);
}

absl::Status PsShard::RestoreState(const PsShardState& dense,
                                   absl::Span<const TableCheckpointView> tables,
                                   int64_t generation, const BytesDone& done) {
  if (!dense.tables.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "restore of shard %d: tables given twice (%d in the state, %d read "
        "in place)",
        config_.shard_id, dense.tables.size(), tables.size()));
  }
  return RestoreFrom(dense, tables, generation, done);
}

absl::Status PsShard::RestoreFrom(const PsShardState& state,
                                  absl::Span<const TableCheckpointView> tables,
                                  int64_t generation, const BytesDone& done) {
  std::vector<ReadyCallback> aborted;
  {
    absl::MutexLock lock(&mu_);
    if (updates_stopped_) return StoppedError();
    RETURN_IF_ERROR(CheckStateLocked(state));
    if (sparse_ == nullptr && !tables.empty()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "state holds %d embedding tables; shard %d's job has none",
          tables.size(), config_.shard_id));
    }
    // Checked and built aside first: nothing changes on error.
    if (sparse_ != nullptr) RETURN_IF_ERROR(sparse_->Restore(tables, done));
    std::vector<DeviceBuffer*> buffers = optimizer_.StateBuffers();
    for (size_t b = 0; b < buffers.size(); ++b) {
      const absl::Status status =
          backend_->CopyToDevice(state.optimizer_state[b].data(),
                                 buffers[b]->size(), buffers[b]->data());
      if (!status.ok()) {
        return absl::InternalError(
            absl::StrFormat("shard %d: cannot restore the optimizer state: %s",
                            config_.shard_id, status.ToString()));
      }
    }
    optimizer_.set_steps_applied(state.optimizer_steps);
    std::vector<float>& params = WritableParamsLocked(/*keep_values=*/false);
    params.assign(state.params.begin(), state.params.end());
    version_ = state.version;
    current_->version = version_;
    RollBackLocked(generation, aborted);
  }
  const absl::Status status = absl::AbortedError(absl::StrFormat(
      "shard %d rolled back to version %d", config_.shard_id, state.version));
  for (ReadyCallback& callback : aborted) callback(status);
  return absl::OkStatus();
}

absl::Status PsShard::FillTables(
    const std::function<absl::Status(SparseStore&)>& fill) {
  absl::MutexLock lock(&mu_);
  if (sparse_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "shard %d's job has no embedding tables to fill", config_.shard_id));
  }
  if (version_ != 0 || rollbacks_ != 0 || updates_stopped_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "shard %d is at version %d: its tables are filled before any update",
        config_.shard_id, version_));
  }
  return fill(*sparse_);
}

absl::StatusOr<int64_t> PsShard::RaiseFence(absl::string_view job_id,
                                            int64_t generation) {
  if (job_id != config_.job_id) {
    return absl::FailedPreconditionError(
        absl::StrFormat("fence for job '%s', this shard serves job '%s'",
                        job_id, config_.job_id));
  }
  if (generation < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("fence: negative generation %d", generation));
  }
  absl::MutexLock lock(&mu_);
  max_generation_ = std::max(max_generation_, generation);
  return max_generation_;
}

absl::Status PsShard::RollBackOpenStep(int64_t version, int64_t generation) {
  std::vector<ReadyCallback> aborted;
  {
    absl::MutexLock lock(&mu_);
    if (updates_stopped_) return StoppedError();
    if (version != version_) {
      return absl::FailedPreconditionError(
          absl::StrFormat("shard %d is at version %d, not %d", config_.shard_id,
                          version_, version));
    }
    RollBackLocked(generation, aborted);
  }
  const absl::Status status = absl::AbortedError(absl::StrFormat(
      "shard %d rolled back to version %d", config_.shard_id, version));
  for (ReadyCallback& callback : aborted) callback(status);
  return absl::OkStatus();
}

}  // namespace ferry

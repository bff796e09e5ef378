// PsShard: exporting and restoring the state (checkpoints, rollback,
// shutdown). The rest of the class is in ps_shard.cc.
#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "ps/ps_shard.h"

namespace ferry {
absl::Status PsShard::StoppedError() const {
  return absl::UnavailableError(
      absl::StrFormat("shard %d is shutting down: it applies no more updates",
                      config_.shard_id));
}

absl::Status PsShard::VisitLocked(const StateVisitor& visit) {
  mu_.AssertHeld();
  PsShardStateView view;
  RETURN_IF_ERROR(slice_.FillView(view));
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

absl::StatusOr<PsShardState> PsShard::ExportState(int64_t expected_version) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(slice_.CheckVersion(expected_version));
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
  RETURN_IF_ERROR(slice_.CheckVersion(expected_version));
  return VisitLocked(visit);
}

absl::Status PsShard::StopUpdatesAndVisit(const StateVisitor& visit) {
  absl::MutexLock lock(&mu_);
  updates_stopped_ = true;
  return VisitLocked(visit);
}

void PsShard::RollBackLocked(int64_t generation,
                             std::vector<ReadyCallback>& aborted) {
  mu_.AssertHeld();
  ledger_.RollBack(slice_.version(), grads_);
  ++rollbacks_;  // pushes begun before now can no longer commit
  arrival_.RollBack(rollbacks_, slice_.version());  // nor sum another chunk
  max_generation_ = std::max(max_generation_, generation);
  waiters_.TakeAll(aborted);
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
    RETURN_IF_ERROR(slice_.CheckState(state));
    if (sparse_ == nullptr && !tables.empty()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "state holds %d embedding tables; shard %d's job has none",
          tables.size(), config_.shard_id));
    }
    // Checked and built aside first: nothing changes on error.
    if (sparse_ != nullptr) RETURN_IF_ERROR(sparse_->Restore(tables, done));
    RETURN_IF_ERROR(slice_.Restore(state));
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
  if (slice_.version() != 0 || rollbacks_ != 0 || updates_stopped_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "shard %d is at version %d: its tables are filled before any update",
        config_.shard_id, slice_.version()));
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
    if (version != slice_.version()) {
      return absl::FailedPreconditionError(
          absl::StrFormat("shard %d is at version %d, not %d", config_.shard_id,
                          slice_.version(), version));
    }
    RollBackLocked(generation, aborted);
  }
  const absl::Status status = absl::AbortedError(absl::StrFormat(
      "shard %d rolled back to version %d", config_.shard_id, version));
  for (ReadyCallback& callback : aborted) callback(status);
  return absl::OkStatus();
}

}  // namespace ferry

#include "ps/ps_checkpointer.h"

#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace ferry {
namespace {

// Restores `shard` from a checkpoint read in place: its dense buffers are
// copied (and their pages released), its rows read once, their pages
// released behind the reader.
absl::Status RestoreFromMapping(PsShard& shard, const MappedCheckpoint& c,
                                int64_t generation) {
  const CheckpointView& view = c.view;
  const BytesDone release = c.releaser();
  PsShardState dense;
  dense.version = view.version;
  dense.optimizer_steps = view.steps_applied;
  dense.params = view.params.ToVector();
  release(view.params.bytes(0, view.params.size()));
  for (const PackedColumn<float>& buffer : view.state) {
    dense.optimizer_state.push_back(buffer.ToVector());
    release(buffer.bytes(0, buffer.size()));
  }
  return shard.RestoreState(dense, view.tables, generation, release);
}

}  // namespace

CheckpointIdentity IdentityOf(const PsShard& shard) {
  CheckpointIdentity id;
  id.job_id = shard.config().job_id;
  id.shard_id = shard.config().shard_id;
  id.num_shards = shard.config().num_shards;
  id.range_begin = shard.range().begin;
  id.range_end = shard.range().end;
  return id;
}

PsCheckpointer::PsCheckpointer(PsShard* shard, FileSystem* fs, std::string dir)
    : shard_(shard),
      dir_(std::move(dir)),
      store_(dir_.empty() ? nullptr
                          : std::make_unique<CheckpointStore>(
                                fs, dir_, IdentityOf(*shard))) {}

absl::Status PsCheckpointer::CheckJob(absl::string_view job_id) const {
  if (job_id != shard_->config().job_id) {
    return absl::FailedPreconditionError(
        absl::StrFormat("request for job '%s', this shard serves job '%s'",
                        job_id, shard_->config().job_id));
  }
  return absl::OkStatus();
}

absl::StatusOr<PsCheckpointWritten> PsCheckpointer::WriteLocked(
    const std::function<absl::Status(const PsShard::StateVisitor&)>& visit) {
  mu_.AssertHeld();
  std::unique_ptr<CheckpointWriter> writer = store_->NewWriter();
  int64_t version = 0;
  const absl::Time begin = absl::Now();
  // Under the shard's lock: the bytes, read in place, into the temp file.
  RETURN_IF_ERROR(visit([&](const PsShardStateView& state) {
    version = state.version;
    CheckpointDenseView dense;
    dense.identity = store_->identity();
    dense.version = state.version;
    dense.steps_applied = state.optimizer_steps;
    dense.params = state.params;
    for (absl::Span<const float> buffer : state.optimizer_state) {
      dense.state.push_back(buffer);
    }
    std::vector<std::unique_ptr<TablePartSource>> sources;
    if (state.sparse != nullptr) sources = state.sparse->CheckpointSources();
    std::vector<const TablePartSource*> tables;
    for (const auto& source : sources) tables.push_back(source.get());
    return writer->Write(dense, tables);
  }));
  const absl::Time written = absl::Now();
  // After it: the fsync and rename.
  ASSIGN_OR_RETURN(std::string path, writer->Commit());
  const absl::Time now = absl::Now();
  {
    absl::MutexLock lock(&time_mu_);
    last_checkpoint_ = now;
  }
  // How long the shard's updates waited for it, and the rest.
  LogInfo("checkpoint file written",
          {{"shard", shard_->config().shard_id},
           {"version", version},
           {"path", path},
           {"locked_seconds", absl::ToDoubleSeconds(written - begin)},
           {"sync_seconds", absl::ToDoubleSeconds(now - written)}});
  return PsCheckpointWritten{std::move(path), version};
}

void PsCheckpointer::DeleteNewerLocked(int64_t version) {
  mu_.AssertHeld();
  if (store_ == nullptr) return;
  absl::StatusOr<int> deleted = store_->DeleteNewerThan(version);
  if (!deleted.ok()) {
    LogWarn("cannot delete checkpoints newer than the restored version",
            {{"shard", shard_->config().shard_id},
             {"version", version},
             {"error", deleted.status()}});
  } else if (*deleted > 0) {
    LogInfo("deleted checkpoints abandoned by the rollback",
            {{"shard", shard_->config().shard_id},
             {"deleted", *deleted},
             {"newer_than_version", version}});
  }
}

absl::StatusOr<PsCheckpointWritten> PsCheckpointer::Checkpoint(
    absl::string_view job_id, int64_t version, std::vector<int64_t> keep) {
  RETURN_IF_ERROR(CheckJob(job_id));
  if (version < -1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("checkpoint version %d: must be >= 0 or -1", version));
  }
  if (store_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "shard %d has no checkpoint directory (--checkpoint-dir)",
        shard_->config().shard_id));
  }
  absl::MutexLock lock(&mu_);
  store_->Pin(std::move(keep));
  return WriteLocked([&](const PsShard::StateVisitor& visit) {
    return shard_->VisitState(version, visit);
  });
}

absl::StatusOr<int64_t> PsCheckpointer::Restore(absl::string_view job_id,
                                                int64_t version,
                                                int64_t generation) {
  RETURN_IF_ERROR(CheckJob(job_id));
  if (version < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("restore to version %d: must be >= 0", version));
  }
  const int32_t shard_id = shard_->config().shard_id;
  absl::MutexLock lock(&mu_);
  absl::Status kept = shard_->RollBackOpenStep(version, generation);
  if (kept.ok()) {
    DeleteNewerLocked(version);
    return version;
  }
  // FAILED_PRECONDITION: the shard is at another version; load it.
  if (!absl::IsFailedPrecondition(kept)) return kept;
  if (store_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "cannot restore shard %d to version %d: %s, and it has no checkpoint "
        "directory (--checkpoint-dir)",
        shard_id, version, kept.message()));
  }
  absl::StatusOr<MappedCheckpoint> checkpoint = store_->MapVersion(version);
  if (absl::IsNotFound(checkpoint.status())) {
    const absl::StatusOr<std::vector<int64_t>> versions =
        store_->ListVersions();
    return absl::FailedPreconditionError(absl::StrFormat(
        "cannot restore shard %d to version %d: %s (checkpoints: [%s]); %s",
        shard_id, version, checkpoint.status().message(),
        versions.ok() ? absl::StrJoin(*versions, ", ") : "?", kept.message()));
  }
  if (!checkpoint.ok()) return checkpoint.status();
  RETURN_IF_ERROR(RestoreFromMapping(*shard_, *checkpoint, generation));
  DeleteNewerLocked(version);
  return version;
}

absl::StatusOr<std::optional<PsCheckpointWritten>> PsCheckpointer::Resume() {
  if (store_ == nullptr) return std::nullopt;
  absl::MutexLock lock(&mu_);
  absl::StatusOr<MappedCheckpoint> checkpoint = store_->MapNewest();
  if (absl::IsNotFound(checkpoint.status())) return std::nullopt;
  if (!checkpoint.ok()) return checkpoint.status();
  const int64_t version = checkpoint->view.version;
  std::string path = checkpoint->path;
  absl::Status restored =
      RestoreFromMapping(*shard_, *checkpoint, /*generation=*/0);
  if (!restored.ok()) {
    return absl::Status(restored.code(),
                        absl::StrCat(path, ": ", restored.message()));
  }
  {
    absl::MutexLock time_lock(&time_mu_);
    last_checkpoint_ = absl::Now();
  }
  return PsCheckpointWritten{std::move(path), version};
}

std::optional<absl::Time> PsCheckpointer::last_checkpoint_time() const {
  absl::MutexLock lock(&time_mu_);
  return last_checkpoint_;
}

absl::StatusOr<std::optional<PsCheckpointWritten>>
PsCheckpointer::CheckpointAndStop() {
  absl::MutexLock lock(&mu_);
  if (store_ == nullptr) {
    RETURN_IF_ERROR(shard_->StopUpdatesAndVisit(
        [](const PsShardStateView&) { return absl::OkStatus(); }));
    return std::nullopt;
  }
  return WriteLocked([&](const PsShard::StateVisitor& visit) {
    return shard_->StopUpdatesAndVisit(visit);
  });
}

}  // namespace ferry

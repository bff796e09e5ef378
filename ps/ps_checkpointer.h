// PsCheckpointer: one PS shard's checkpoints, without gRPC types: the
// Checkpoint and Restore operations of ferry.v1.ParameterServer, resuming
// from the newest checkpoint at start and the last checkpoint at shutdown.
// Files are written by a CheckpointStore (common/checkpoint_io.h) in the
// shard's checkpoint directory.
//
// Restore(version, generation):
//  - the shard is at `version`: keeps its state (RollBackOpenStep);
//  - else loads the checkpoint of exactly `version` (RestoreState).
// Either way the open step's pushes are dropped, pending pulls end ABORTED,
// pushes and finalizes of generations older than `generation` are ABORTED
// from then on, and the shard's checkpoints newer than `version` are
// deleted: the job abandoned those states, and a restart must not resume
// from one of them.
//
// Restores read in place: the checkpoint file is mapped
// (CheckpointStore::MapVersion / MapNewest), its dense buffers copied and
// its rows inserted into the shard's new tables front to back, each batch's
// pages released behind the reader, so that a restore holds no copy of the
// rows either (PsShard::RestoreState with table views).
//
// Writes stream: a checkpoint's bytes are encoded from the shard's state
// read in place (PsShard::VisitState: the slice, and the embedding rows a
// storage block at a time) straight into the file's temp name, so that a
// shard never holds a second copy of its rows; the fsync and rename come
// after. A failed write leaves the checkpoint files and the shard as they
// were.
//
// Thread safety: thread-safe; Checkpoint, Restore, Resume and
// CheckpointAndStop are serialized. File I/O happens on the caller's
// thread: a checkpoint's bytes are written (to the page cache) under the
// shard's lock, so its pushes, pulls and row reads wait that long (about a
// second per GB of rows, longer once the kernel throttles dirty pages:
// docs/sparse.md, "Memory per row"); its fsync, rename and pruning come
// after, outside it.
#ifndef FERRY_PS_PS_CHECKPOINTER_H_
#define FERRY_PS_PS_CHECKPOINTER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/checkpoint_io.h"
#include "common/file_system.h"
#include "ps/ps_shard.h"

namespace ferry {

struct PsCheckpointWritten {
  std::string path;
  int64_t version = 0;
};

class PsCheckpointer {
 public:
  // `shard` and `fs` are not owned and must outlive the checkpointer. An
  // empty `dir` means no checkpoint directory.
  PsCheckpointer(PsShard* shard, FileSystem* fs, std::string dir);

  bool has_directory() const { return store_ != nullptr; }
  const std::string& dir() const { return dir_; }

  // Writes the shard's state at `version` (-1: the current one); the
  // versions in `keep` are not pruned (CheckpointRequest.keep). Errors:
  //  FAILED_PRECONDITION wrong job, no checkpoint directory, `version` is
  //                      not the shard's current version (named);
  //  INVALID_ARGUMENT    version < -1;
  //  the file system's errors (INTERNAL, PERMISSION_DENIED, ...).
  absl::StatusOr<PsCheckpointWritten> Checkpoint(
      absl::string_view job_id, int64_t version,
      std::vector<int64_t> keep = {});

  // See the file comment; returns the shard's version after it. Errors:
  //  FAILED_PRECONDITION wrong job; no checkpoint directory or no checkpoint
  //                      of `version` in it (when the shard is elsewhere); a
  //                      checkpoint of another slice or optimizer;
  //  INVALID_ARGUMENT    version < 0;
  //  DATA_LOSS           the checkpoint of `version` is corrupt;
  //  UNAVAILABLE         the shard is shutting down.
  absl::StatusOr<int64_t> Restore(absl::string_view job_id, int64_t version,
                                  int64_t generation);

  // At start: restores the newest valid checkpoint (generation 0), skipping
  // corrupt or foreign ones with a warning. nullopt when there is no
  // directory or no valid checkpoint in it. Errors: listing the directory
  // failed; the newest valid checkpoint does not fit the shard's optimizer.
  absl::StatusOr<std::optional<PsCheckpointWritten>> Resume();

  // At shutdown: PsShard::StopUpdates() (no update is applied after the
  // state it returns), then writes that state when there is a directory
  // (nullopt otherwise).
  absl::StatusOr<std::optional<PsCheckpointWritten>> CheckpointAndStop();

  // When the shard's state was last durable: the last checkpoint written,
  // or the one Resume() restored (the state equals it then). nullopt before
  // either. Does not wait for a checkpoint in progress.
  std::optional<absl::Time> last_checkpoint_time() const
      ABSL_LOCKS_EXCLUDED(time_mu_);

 private:
  absl::Status CheckJob(absl::string_view job_id) const;
  // Writes the state `visit` shows its visitor (PsShard::VisitState or
  // StopUpdatesAndVisit), then commits the file.
  absl::StatusOr<PsCheckpointWritten> WriteLocked(
      const std::function<absl::Status(const PsShard::StateVisitor&)>& visit)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DeleteNewerLocked(int64_t version) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  PsShard* const shard_;
  const std::string dir_;
  absl::Mutex mu_;
  const std::unique_ptr<CheckpointStore> store_;  // null without a directory
  mutable absl::Mutex time_mu_;
  std::optional<absl::Time> last_checkpoint_ ABSL_GUARDED_BY(time_mu_);
};

// The identity of `shard`'s slice, as checkpoints record it.
CheckpointIdentity IdentityOf(const PsShard& shard);

}  // namespace ferry

#endif  // FERRY_PS_PS_CHECKPOINTER_H_

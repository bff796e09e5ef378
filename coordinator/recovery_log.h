// RecoveryLog: what the coordinator needs to bring the PS shards and its
// task accounting back to one consistent step after a shard (or the
// coordinator) restarted: the data tasks of every applied step since the
// oldest checkpoint a restarted shard may hold, the shards' complete
// checkpoints, and the choice of the version to restore to.
//
// Ownership: plain value type.
// Thread safety: not thread-safe. The Coordinator holds it as a field
// guarded by its mutex (ABSL_GUARDED_BY(mu_)); every call happens under
// that mutex.
#ifndef FERRY_COORDINATOR_RECOVERY_LOG_H_
#define FERRY_COORDINATOR_RECOVERY_LOG_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "ferry/v1/coordinator.pb.h"
#include "ferry/v1/coordinator_state.pb.h"

namespace ferry {

// What a recovery does after ShardControl::RestoreTo(target) returned
// `restored` (sync rollbacks and async barriers alike): kDone when it
// succeeded; kRetry when a shard was unreachable or slow (UNAVAILABLE,
// DEADLINE_EXCEEDED, or anything else transient-looking at target > 0);
// kTryOlder when the checkpoint of `target` > 0 is missing or damaged
// (FAILED_PRECONDITION, DATA_LOSS: forget it, take the one before); kGiveUp
// when even version 0 cannot be restored for a reason retrying will not
// change.
enum class RestoreFailureAction { kDone, kRetry, kTryOlder, kGiveUp };
RestoreFailureAction AfterRestore(const absl::Status& restored, int64_t target);

class RecoveryLog {
 public:
  // Checkpoints remembered (the newest ones).
  static constexpr size_t kCheckpointsKept = 3;

  // Logs `step` as applied (with no tasks yet).
  void LogStep(int64_t step) { steps_[step]; }
  // Records that `task` was applied in `step` (appends to the step's list).
  void RecordApplied(int64_t step, const v1::DataTask& task);
  // Forgets `step` (it was not applied after all).
  void Forget(int64_t step);
  // Forgets every step (a new epoch: its steps cannot be rolled back into
  // the previous one).
  void ClearSteps() { steps_.clear(); }

  // Every shard holds a checkpoint at `version` (REQUIRES: version >= 0).
  // Keeps the newest kCheckpointsKept, and the steps from the second
  // newest on (the oldest a restarted shard may come back with).
  void AddCheckpoint(int64_t version);
  // A restore to a version >= `version` failed: forgets those checkpoints.
  void DropCheckpointsFrom(int64_t version);
  // The newest checkpoint, -1 when there is none.
  int64_t latest_checkpoint() const {
    return checkpoints_.empty() ? -1 : checkpoints_.back();
  }
  const std::vector<int64_t>& checkpoints() const { return checkpoints_; }

  // Hybrid jobs whose ring writes checkpoints: the log keeps the steps
  // from the newest version both halves hold (the job's start while there
  // is none), so that a ring that lost every member can go back there.
  void KeepStepsForRingCheckpoints() { ring_keeps_steps_ = true; }
  // Hybrid jobs: the ring's members wrote a complete checkpoint of the
  // dense layers at `version` (JobSpec.ring_checkpoint_dir). Keeps the
  // newest kCheckpointsKept, and the steps from the newest one on.
  void AddRingCheckpoint(int64_t version);
  // A ring restore from a version >= `version` failed: forgets those.
  void DropRingCheckpointsFrom(int64_t version);
  // Hybrid jobs: the versions both halves can return to (a shards'
  // checkpoint and a ring checkpoint), oldest first.
  std::vector<int64_t> CheckpointsOfBothHalves() const;

  // The version to restore every shard to, given the lowest and highest
  // version the shards report and the job's applied steps: the lowest
  // version (never above `steps_applied`), or the newest checkpoint at or
  // below it when no checkpoint holds it (unless every shard is there
  // already); 0 when there is none.
  int64_t RestoreTarget(int64_t low, int64_t high, int64_t steps_applied) const;

  // True when the log reaches back to `target` (the tasks of every step
  // from `target` on are known).
  bool Covers(int64_t target) const {
    return !steps_.empty() && steps_.begin()->first <= target;
  }
  // The first logged step, `otherwise` when the log is empty.
  int64_t first_step(int64_t otherwise) const {
    return steps_.empty() ? otherwise : steps_.begin()->first;
  }
  // Removes and returns the tasks of the steps >= `target`, newest step
  // first and each step's tasks last first, so that reclaiming them in
  // this order makes the queue hand them out in their old order.
  std::vector<v1::DataTask> TakeFrom(int64_t target);

  void SaveTo(v1::CoordinatorState& state) const;
  void LoadFrom(const v1::CoordinatorState& state);

 private:
  std::map<int64_t, std::vector<v1::DataTask>> steps_;
  // Drops the logged steps before the oldest version a rollback may go
  // back to (see AddCheckpoint and AddRingCheckpoint).
  void TrimSteps();

  std::vector<int64_t> checkpoints_;       // complete, oldest first
  std::vector<int64_t> ring_checkpoints_;  // hybrid: complete, oldest first
  bool ring_keeps_steps_ = false;
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_RECOVERY_LOG_H_

// CheckpointPlan: when the PS shards are checkpointed. Every `every`
// applied steps (sync) or tasks (async) and at every epoch end; off for
// good once a shard says it has no checkpoint directory. Hybrid jobs (a
// ring beside the shards) also force one: when no member holds the ring's
// dense state of the newest checkpoint, the next step formed is
// checkpointed (its members keep their state, the shards are checkpointed
// at its version).
//
// Ownership: plain value type.
// Thread safety: not thread-safe. The Coordinator holds it as a field
// guarded by its mutex (ABSL_GUARDED_BY(mu_)).
#ifndef FERRY_COORDINATOR_CHECKPOINT_PLAN_H_
#define FERRY_COORDINATOR_CHECKPOINT_PLAN_H_

#include <cstdint>
#include <optional>
#include <set>

#include "absl/time/time.h"

namespace ferry {

class CheckpointPlan {
 public:
  // `on`: the job has shards. `every` >= 0 (0: epoch ends only).
  CheckpointPlan(bool on, int64_t every) : on_(on), every_(every) {}

  bool on() const { return on_; }
  // A shard has no checkpoint directory: no checkpoint from now on.
  void TurnOff() { on_ = false; }

  // Sync: whether the shards are checkpointed at `version` once the step
  // before it is applied: `forced`, an epoch's end or a multiple of
  // `every`. False when off. (Async cuts: DueAfterTasks and the barrier.)
  bool Due(int64_t version, bool epoch_end, bool forced) const {
    return on_ &&
           (forced || epoch_end || (every_ > 0 && version % every_ == 0));
  }
  // Async: whether `tasks_applied` applied tasks call for a checkpoint.
  bool DueAfterTasks(int64_t tasks_applied) const {
    return on_ && every_ > 0 && tasks_applied % every_ == 0;
  }
  // Whether the coordinator checkpoints the shards at version `step`
  // (a positive multiple of `every`, or a forced checkpoint's step): the
  // shards must still be at `step` then, so they do not apply it on push.
  bool AtStep(int64_t step) const {
    return forced_.contains(step) ||
           (on_ && every_ > 0 && step > 0 && step % every_ == 0);
  }
  // Hybrid: whether the members of `step` keep their dense state of it (a
  // version the shards will be checkpointed at): an epoch's first step
  // (`epoch_start`), a multiple of `every`, or a forced one (ForcedAt).
  bool KeepsState(int64_t step, bool epoch_start) const {
    return on_ && (epoch_start || (every_ > 0 && step % every_ == 0) ||
                   ForcedAt(step));
  }

  // Whether `step`, about to be formed, is a forced checkpoint's: one is
  // asked for (ForceNext), or `step` is one formed again.
  bool ForcedAt(int64_t step) const {
    return on_ && (force_next_ || forced_.contains(step));
  }
  // Whether a forced checkpoint is asked for or on its way.
  bool forcing() const { return force_next_ || !forced_.empty(); }
  // The next step formed is a forced checkpoint's.
  void ForceNext() { force_next_ = true; }
  // `step` was formed as a forced checkpoint's (ForcedAt was true).
  void MarkForced(int64_t step) {
    forced_.insert(step);
    force_next_ = false;
  }
  // The finalizer checkpoints `step`'s version now: true when `step` was
  // a forced checkpoint's (forgotten from then on).
  bool TakeForced(int64_t step) { return forced_.erase(step) > 0; }

  // The version of an epoch's start whose checkpoint failed; nullopt when
  // none is owed.
  const std::optional<int64_t>& owed() const { return owed_; }
  // Attempts at the owed checkpoint that failed.
  int owed_failures() const { return owed_failures_; }
  // Since when the owed checkpoint has been owed.
  absl::Time owed_since() const { return owed_since_; }
  // The checkpoint at `version` (an epoch's start) failed or was not made
  // at `now`: the next epoch waits for it (a new version starts the count
  // and owed_since over).
  void Owe(int64_t version, absl::Time now) {
    if (owed_ != version) {
      owed_failures_ = 0;
      owed_since_ = now;
    }
    owed_ = version;
  }
  void OwedAttemptFailed() { ++owed_failures_; }
  // The owed checkpoint was written, or is moot (the job rolled back).
  void Settle() {
    owed_.reset();
    owed_failures_ = 0;
  }

 private:
  bool on_;
  const int64_t every_;
  bool force_next_ = false;
  // Steps formed as forced checkpoints', until their finalize.
  std::set<int64_t> forced_;
  std::optional<int64_t> owed_;
  int owed_failures_ = 0;
  absl::Time owed_since_;
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_CHECKPOINT_PLAN_H_

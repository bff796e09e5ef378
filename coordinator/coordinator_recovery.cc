// The coordinator's checkpoints and shard recovery: checkpoints every
// checkpoint_every steps and at epoch ends, fencing the shards when the
// membership changes, watching them, and rolling the job back to the newest
// checkpoint when a shard lost its state (see coordinator.h).
#include <algorithm>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/backoff.h"
#include "common/log.h"
#include "common/prometheus_metrics.h"
#include "common/status_macros.h"
#include "coordinator/coordinator.h"

namespace ferry {
namespace {

void Log(const std::string& line) { LogInfo(line); }

// The longest wait between attempts at an owed checkpoint.
constexpr absl::Duration kOwedCheckpointMaxWait = absl::Seconds(10);

}  // namespace

void Coordinator::MaybeCheckpoint(int64_t version, bool epoch_end,
                                  bool forced) {
  std::vector<int64_t> keep;
  {
    absl::MutexLock lock(&mu_);
    if (!checkpoint_plan_.Due(version, epoch_end, forced)) return;
    keep = recovery_.checkpoints();
  }
  // A failure at an epoch's end is retried before the next epoch starts
  // (EpochStartUnsaved).
  const absl::Status status = shards_->Checkpoint(version, keep);
  absl::MutexLock lock(&mu_);
  if (!status.ok()) {
    CheckpointFailed(version, status);
    return;
  }
  recovery_.AddCheckpoint(version);
  PersistDurably();
}

void Coordinator::CheckpointFailed(int64_t version,
                                   const absl::Status& status) {
  if (absl::IsFailedPrecondition(status) &&
      absl::StrContains(status.message(), "no checkpoint directory")) {
    checkpoint_plan_.TurnOff();  // shards run without --checkpoint-dir
    Log("shards have no checkpoint directory: checkpoints are off");
  }
  const bool waits = checkpoint_plan_.on() && queue_->complete() &&
                     queue_->epoch() + 1 < options_.job.epochs();
  if (waits && checkpoint_plan_.owed() == version) {
    checkpoint_plan_.OwedAttemptFailed();
    const absl::Duration waited = Now() - checkpoint_plan_.owed_since();
    if (waited >= options_.checkpoint_wait_limit && error_.empty()) {
      error_ = absl::StrFormat(
          "epoch %d has waited %.0f s for its start (version %d) to be "
          "checkpointed: %s. The job goes on once the shards can write it "
          "(free space on, or make writable, their --checkpoint-dir)",
          queue_->epoch() + 2, absl::ToDoubleSeconds(waited), version,
          status.message());
      error_is_checkpoint_wait_ = true;
      LogWarn(error_);
    }
  }
  Log(absl::StrCat("checkpoint at version ", version,
                   " failed: ", status.ToString(),
                   waits ? "; the next epoch waits for it" : ""));
  AddEvent(
      "checkpoint_failed", "", version, 0,
      absl::StrCat(status.message(), waits ? " (the next epoch waits)" : ""));
}

bool Coordinator::EpochStartUnsaved(int64_t version) {
  if (!checkpoint_plan_.on() || recovery_.latest_checkpoint() == version) {
    SettleOwedCheckpoint();
    return false;
  }
  checkpoint_plan_.Owe(version, Now());
  recovery_state_.Require(absl::StrCat("epoch ", queue_->epoch() + 1,
                                       " waits for its start (version ",
                                       version, ") to be checkpointed"));
  return true;
}

void Coordinator::SettleOwedCheckpoint() {
  checkpoint_plan_.Settle();
  if (error_is_checkpoint_wait_) {
    error_.clear();
    error_is_checkpoint_wait_ = false;
  }
}

bool Coordinator::WaitBeforeOwedCheckpoint() {
  const int failures = checkpoint_plan_.owed_failures();
  if (!checkpoint_plan_.owed().has_value() || failures == 0) return stopping_;
  RetryPolicy policy;
  policy.initial_backoff = options_.shard_retry;
  policy.max_backoff = std::max(options_.shard_retry, kOwedCheckpointMaxWait);
  return mu_.AwaitWithTimeout(absl::Condition(&stopping_),
                              BackoffCeiling(policy, failures - 1));
}

bool Coordinator::RetryOwedCheckpoint() {
  int64_t version = 0;
  std::vector<int64_t> keep;
  {
    absl::MutexLock lock(&mu_);
    if (!checkpoint_plan_.owed().has_value()) return false;
    version = *checkpoint_plan_.owed();
    keep = recovery_.checkpoints();
    if (WaitBeforeOwedCheckpoint()) return true;  // stopping
  }
  absl::StatusOr<std::vector<int64_t>> versions = shards_->Versions();
  if (versions.ok() && !versions->empty() &&
      *std::min_element(versions->begin(), versions->end()) < version) {
    absl::MutexLock lock(&mu_);
    SettleOwedCheckpoint();
    return false;  // a shard restarted behind it: roll back in this epoch
  }
  const absl::Status status =
      versions.ok() ? shards_->Checkpoint(version, keep) : versions.status();
  std::vector<Reply> replies;
  {
    absl::MutexLock lock(&mu_);
    if (!status.ok()) {
      CheckpointFailed(version, status);
      return true;
    }
    SettleOwedCheckpoint();
    recovery_.AddCheckpoint(version);
    AddEvent("checkpoint_retried", "", version, 0,
             "the epoch's start is checkpointed; the next epoch starts");
    recovery_state_.Done();
    AdvanceEpochIfComplete();
    PersistDurably();
    ServeWaiters(replies, false);
  }
  ParkedCalls::Send(replies);
  return true;
}

bool Coordinator::FenceDue() const {
  // Hybrid needs no fence of its own: a join leaves the open steps' member
  // sets alone (ring semantics), and every abort already fences the shards
  // through RecoverShards' restore.
  return shards_ != nullptr && rules_.fence_shards_per_generation() &&
         recovery_state_.FenceDue(membership_.generation());
}

void Coordinator::FenceShards(int64_t generation) {
  const absl::Status status = shards_->Fence(generation);
  absl::MutexLock lock(&mu_);
  recovery_state_.Fenced(generation);
  if (!status.ok()) {
    AddEvent("fence_failed", "", steps_.formed(), 0,
             absl::StrCat("generation ", generation, ": ", status.message()));
  }
}

void Coordinator::WatchShards() {
  if (async_barriers()) {
    // Every reported task was applied on every shard: a shard below the
    // applied tasks restarted and lost updates.
    absl::StatusOr<std::vector<int64_t>> versions = shards_->Versions();
    if (!versions.ok() || versions->empty()) return;
    const int64_t low = *std::min_element(versions->begin(), versions->end());
    absl::MutexLock lock(&mu_);
    if (low >= tasks_applied_ || recovery_state_.needed()) return;
    recovery_state_.Require(
        absl::StrCat("shard ",
                     std::min_element(versions->begin(), versions->end()) -
                         versions->begin(),
                     " is at version ", low, " behind the ", tasks_applied_,
                     " applied tasks (it restarted)"));
    return;
  }
  if (!rules_.shards_apply_finalized_steps()) return;
  absl::StatusOr<std::vector<int64_t>> versions = shards_->Versions();
  if (!versions.ok() || versions->empty())
    return;  // down: FinalizeStep retries
  const auto low = std::min_element(versions->begin(), versions->end());
  const auto high = std::max_element(versions->begin(), versions->end());
  std::string why;
  std::vector<Reply> replies;
  {
    absl::MutexLock lock(&mu_);
    if (!halted_.empty()) return;
    // Every version a shard holds was made by a step this coordinator
    // formed (its state is saved before a step's leases go out), so a
    // shard ahead of them resumed another run's checkpoint: no step could
    // ever be applied (each push "already applied"). Stop with the reason.
    if (*high > steps_.formed() && !recovery_state_.needed()) {
      HaltForeignShardState(static_cast<int>(high - versions->begin()), *high,
                            replies);
    } else if (*low < steps_applied_ && !recovery_state_.needed()) {
      // Every finalized step is on every shard: a lower version is a
      // restart.
      recovery_state_.Require();
      why = absl::StrCat("shard ", low - versions->begin(), " is at version ",
                         *low, " behind the job's ", steps_applied_,
                         " (it restarted)");
    }
  }
  ParkedCalls::Send(replies);
  if (!why.empty()) RecoverShards(why);
}

void Coordinator::HaltForeignShardState(int shard, int64_t version,
                                        std::vector<Reply>& replies) {
  halted_ = absl::StrCat(
      "shard ", shard, " is at version ", version, ", ahead of the ",
      steps_.formed(),
      " steps this coordinator has formed: it resumed the checkpoint of "
      "another run (a reused --checkpoint-dir, or ferry local's --log-dir), "
      "or this coordinator lost its state. The job stops; remove that "
      "shard's checkpoints, or start the coordinator with the --state-dir "
      "of the run they belong to");
  if (error_.empty()) error_ = halted_;
  LogError(halted_);
  AddEvent("halted", "", steps_.formed(), 0, halted_);
  ServeWaiters(replies, false);  // parked workers learn it now
}

void Coordinator::RecoverShards(const std::string& why) {
  if (async_barriers()) {
    RunAsyncBarrier(why);
    return;
  }
  if (RetryOwedCheckpoint()) return;
  if (!rules_.shards_apply_finalized_steps()) {
    std::vector<Reply> replies;
    {
      absl::MutexLock lock(&mu_);
      // Ring: a step is in doubt only once every member reported it applied.
      if (recovery_state_.in_doubt().has_value())
        ResolveInDoubt(rules_.members_hold_weights());
      AbortOpenSteps(0, true, why, "");
      steps_.set_formed(steps_applied_);
      recovery_state_.Done();
      AdvanceEpochIfComplete();
      PersistDurably();
      // Members parked in NextTask while no step could form get one now.
      ServeWaiters(replies, false);
    }
    ParkedCalls::Send(replies);
    return;
  }
  while (true) {
    absl::StatusOr<std::vector<int64_t>> versions = shards_->Versions();
    int64_t target = 0;
    int64_t generation = 0;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      if (!versions.ok() || versions->empty()) {
        mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.shard_retry);
        continue;
      }
      const int64_t low = *std::min_element(versions->begin(), versions->end());
      const int64_t high =
          *std::max_element(versions->begin(), versions->end());
      if (const auto& in_doubt = recovery_state_.in_doubt())
        ResolveInDoubt(low == high && low == in_doubt->step() + 1);
      ApplyStepsPastEveryShard(low);
      target = recovery_.RestoreTarget(low, high, steps_applied_);
      // Hybrid: the ring's members roll their dense layers back to the
      // same version when the next ring forms (its leases' step is the
      // target; they kept their state at every checkpoint version:
      // OpenStep.keep_state).
      AbortOpenSteps(0, true, why, "");
      generation = membership_.generation();
      PersistDurably();
    }
    absl::Status restored = shards_->RestoreTo(target, generation);
    const RestoreFailureAction next = AfterRestore(restored, target);
    if (next == RestoreFailureAction::kGiveUp) {
      absl::MutexLock lock(&mu_);
      error_ = absl::StrCat("no version every shard can return to: ",
                            restored.message());
      Log(error_);
      return;  // the recovery stays needed: no step forms
    }
    if (next == RestoreFailureAction::kTryOlder) {
      absl::MutexLock lock(&mu_);
      Log(absl::StrCat("restore to version ", target, " failed (",
                       restored.ToString(), "); trying an older checkpoint"));
      recovery_.DropCheckpointsFrom(target);
      continue;
    }
    std::vector<Reply> replies;
    {
      absl::MutexLock lock(&mu_);
      if (next == RestoreFailureAction::kRetry) {
        Log(absl::StrCat("restoring the shards to version ", target,
                         " failed: ", restored.ToString(), "; retrying"));
        mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.shard_retry);
        if (stopping_) return;
        continue;
      }
      RollBackAccounting(target);
      recovery_state_.Done();
      AdvanceEpochIfComplete();
      PersistDurably();
      ServeWaiters(replies, false);
    }
    ParkedCalls::Send(replies);
    return;
  }
}

void Coordinator::ApplyStepsPastEveryShard(int64_t low) {
  // Only where a step's slots stay the set its leases named (a lost member
  // aborts the step instead of leaving it: sum on arrival, PS pipelines),
  // so that a finalizing step is the set the shards applied on push, and
  // nothing else holds state of it (no ring).
  if (!rules_.steps_recoverable_from_shards() ||
      recovery_state_.in_doubt().has_value())
    return;
  while (steps_applied_ < low) {
    const int64_t number = steps_applied_;
    OpenStep* step = steps_.Find(number);
    if (step == nullptr || !step->finalizing || !LeaseNamesContributors(number))
      return;
    steps_.Dequeue(number);
    ApplyStep(number);
    AddEvent("step_recovered", "", number, 0,
             "applied on push by every shard before a recovery");
  }
}

void Coordinator::RollBackAccounting(int64_t target) {
  const int64_t from = rules_.sync() ? steps_applied_ : tasks_applied_;
  int64_t lost = 0;
  if (target < from) {
    if (!recovery_.Covers(target)) {
      error_ = absl::StrCat(
          "the shards rolled back to version ", target,
          " before the applied-step log (", recovery_.first_step(from),
          "): samples of the undone steps may be missed this epoch");
      Log(error_);
    }
    // Newest first, so that the queue hands them out in their old order.
    for (const v1::DataTask& t : recovery_.TakeFrom(target)) {
      if (queue_->Reclaim(t).ok()) lost += t.end() - t.begin();
    }
    progress_.TakeBack(lost);
    recovery_state_.CountRollback();
  }
  SettleOwedCheckpoint();  // an owed epoch start is moot: it re-ends
  if (rules_.sync()) {
    steps_applied_ = target;
    steps_.set_formed(target);
  } else {
    tasks_applied_ = target;
  }
  recovery_state_.ClearInDoubt();
  if (target < from) {
    AddEvent(rules_.has_shards() ? "shards_rolled_back" : "rolled_back", "",
             target, lost, absl::StrCat("from version ", from, " to ", target));
  }
}

}  // namespace ferry

// Exactly-once for async and SSP jobs: the barrier (see coordinator.h).
// Shards apply async pushes on arrival, one version per push, so after
// every leased task is reported (or given back) and every older push is
// fenced out, each shard's version must equal the job's applied tasks. The
// barrier checks exactly that every --checkpoint-every tasks, at every
// epoch end and when a shard is seen behind (it restarted): equal, every
// shard is checkpointed at that version (a consistent cut); not equal (a
// shard lost updates in a restart, or holds a push of a task that was not
// counted: a worker that died between its pushes, a late push of an
// evicted worker), every shard goes back to the newest such cut and the
// tasks applied since go back to the queue in their old order.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "coordinator/coordinator.h"

namespace ferry {

bool Coordinator::AnyLeaseOut() const {
  for (const auto& [id, m] : membership_.members()) {
    if (!m.leases.empty()) return true;
  }
  return false;
}

void Coordinator::RunAsyncBarrier(const std::string& why) {
  int64_t generation = 0;
  {
    absl::MutexLock lock(&mu_);
    if (WaitBeforeOwedCheckpoint()) return;  // stopping
    // No new lease forms while the recovery is needed (TryAssignAsync):
    // wait for the leased ones to be reported, or given back when their
    // holder is evicted.
    mu_.Await(absl::Condition(
        +[](Coordinator* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
          return c->stopping_ || !c->AnyLeaseOut();
        },
        this));
    if (stopping_) return;
    generation = membership_.NextGeneration();  // leases from now on
  }
  // Fence: no push of a lease from before lands from here on, so the
  // versions read next stay put.
  std::vector<int64_t> versions;
  while (true) {
    const absl::Status fenced = shards_->Fence(generation);
    absl::StatusOr<std::vector<int64_t>> read = shards_->Versions();
    if (fenced.ok() && read.ok()) {
      versions = *std::move(read);
      break;
    }
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.shard_retry))
      return;
  }
  int64_t applied = 0;
  bool checkpoint = false;
  std::vector<int64_t> keep;
  {
    absl::MutexLock lock(&mu_);
    applied = tasks_applied_;
    checkpoint = checkpoint_plan_.on();
    keep = recovery_.checkpoints();
  }
  const bool consistent = std::all_of(versions.begin(), versions.end(),
                                      [&](int64_t v) { return v == applied; });
  if (consistent) {
    const absl::Status saved =
        checkpoint ? shards_->Checkpoint(applied, keep) : absl::OkStatus();
    std::vector<Reply> replies;
    {
      absl::MutexLock lock(&mu_);
      if (checkpoint && saved.ok()) {
        recovery_.AddCheckpoint(applied);
        AddEvent(
            "async_checkpoint", "", applied, 0,
            absl::StrCat("every shard at version ", applied, " (", why, ")"));
      } else if (!saved.ok()) {
        CheckpointFailed(applied, saved);
      }
      async_checked_tasks_ = applied;
      recovery_state_.Done();
      const int64_t max_steps = options_.job.max_steps();
      if (max_steps > 0 && tasks_applied_ >= max_steps) {
        if (!evals_.training_done()) FinishJob();
      } else {
        AdvanceEpochIfComplete();
      }
      PersistDurably();
      ServeWaiters(replies, false);
    }
    ParkedCalls::Send(replies);
    return;
  }
  RollBackAsync(versions, applied, generation, why);
}

void Coordinator::RollBackAsync(const std::vector<int64_t>& versions,
                                int64_t applied, int64_t generation,
                                const std::string& why) {
  const std::string detail =
      absl::StrCat("shard versions [", absl::StrJoin(versions, ", "),
                   "], applied tasks ", applied, " (", why, ")");
  while (true) {
    int64_t target = 0;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      target = recovery_.latest_checkpoint();
      if (target < 0 || target > applied) target = 0;
      if (!recovery_.Covers(target) && target < applied) {
        // Nothing to go back to in this epoch: say so, go on.
        error_ = absl::StrCat("async shards disagree with the job (", detail,
                              ") and no checkpoint of this epoch is left");
        LogWarn(error_);
        recovery_state_.Done();
        return;
      }
    }
    const absl::Status restored = shards_->RestoreTo(target, generation);
    const RestoreFailureAction next = AfterRestore(restored, target);
    std::vector<Reply> replies;
    {
      absl::MutexLock lock(&mu_);
      if (next == RestoreFailureAction::kGiveUp) {
        error_ = absl::StrCat(
            "async shards disagree with the job (", detail,
            ") and cannot go back to the start: ", restored.message());
        LogWarn(error_);
        recovery_state_.Done();
        return;
      }
      if (next == RestoreFailureAction::kTryOlder) {
        LogWarn("async restore failed: trying an older checkpoint",
                {{"version", target}, {"why", restored.ToString()}});
        recovery_.DropCheckpointsFrom(target);
        continue;
      }
      if (next == RestoreFailureAction::kRetry) {
        LogWarn("async restore failed: retrying",
                {{"version", target}, {"why", restored.ToString()}});
        mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.shard_retry);
        continue;
      }
      RollBackAccounting(target);
      AddEvent("async_rolled_back", "", target, 0,
               absl::StrCat("back to version ", target, ": ", detail));
      async_checked_tasks_ = target;
      recovery_state_.Done();
      AdvanceEpochIfComplete();
      PersistDurably();
      ServeWaiters(replies, false);
    }
    ParkedCalls::Send(replies);
    return;
  }
}

}  // namespace ferry

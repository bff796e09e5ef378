// The coordinator's step life cycle: forming a step (its members, their
// shares and the ring its leases carry), reports, finalization on the
// shards and aborts (see coordinator.h; checkpoints and shard recovery are
// in coordinator_recovery.cc).
#include <algorithm>
#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/peer_limits.h"
#include "common/prometheus_metrics.h"
#include "common/status_macros.h"
#include "coordinator/coordinator.h"
#include "coordinator/step_times.h"

namespace ferry {
namespace {

constexpr absl::Duration kShardWatchInterval = absl::Seconds(1);

// RESOURCE_EXHAUSTED when a map of `counts` has more than
// kMaxByteCountEntries keys or a key longer than kMaxIdBytes.
absl::Status CheckByteCounts(absl::string_view what,
                             const v1::ByteCounts& counts) {
  for (const auto* map :
       {&counts.sent(), &counts.received(), &counts.calls()}) {
    const int64_t entries = static_cast<int64_t>(map->size());
    if (entries > kMaxByteCountEntries) {
      return LimitExceeded(
          absl::StrCat("the number of peers in the report's ", what), entries,
          kMaxByteCountEntries);
    }
    for (const auto& [peer, count] : *map) {
      RETURN_IF_ERROR(CheckIdLength(
          absl::StrCat("a peer name in the report's ", what), peer));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Coordinator::StopDiverged(const Member& member,
                                       const v1::StepReport& done) {
  constexpr size_t kMaxReason = 1000;
  if (done.diverged().size() > kMaxReason) {
    return absl::InvalidArgumentError(
        absl::StrCat("the reason step ", done.step(), " diverged holds ",
                     done.diverged().size(), " bytes; at most ", kMaxReason));
  }
  if (!diverged_.empty()) return absl::OkStatus();  // the first one says it
  diverged_ = absl::StrCat(
      "training diverged at step ", done.step(), ": ", done.diverged(),
      " (worker ", member.id,
      "); nothing of that step is counted and the job stops. Lower --lr, "
      "lengthen --warmup-steps or start from an earlier checkpoint");
  if (error_.empty()) error_ = diverged_;
  LogWarn(diverged_);
  AddEvent("diverged", member.id, done.step(), 0, done.diverged());
  return absl::OkStatus();
}

absl::Status Coordinator::RecordDone(Member& member,
                                     const v1::StepReport& done) {
  if (!done.diverged().empty()) return StopDiverged(member, done);
  RETURN_IF_ERROR(CheckStepTimes(done));
  RETURN_IF_ERROR(CheckByteCounts("bytes", done.bytes()));
  RETURN_IF_ERROR(CheckByteCounts("peer_bytes", done.peer_bytes()));
  RETURN_IF_ERROR(progress_.AddReport(done));
  member.bytes = done.bytes();  // cumulative counts: the latest replaces
  member.peer_bytes = done.peer_bytes();
  if (rules_.sync()) {
    OpenStep* open = steps_.Find(done.step());
    Slot* slot = nullptr;
    if (open != nullptr) {
      for (Slot& s : open->slots) {
        if (s.worker_id == member.id) slot = &s;
      }
    }
    // A step that is finalizing was closed over the reports it had (a
    // quorum): a late report must not mark its samples applied.
    if (slot == nullptr || (!slot->pushed && open->finalizing) ||
        done.fence() != open->fence) {
      return absl::AbortedError(absl::StrCat(
          "step ", done.step(), " is not open for ", member.id,
          " (finalized without it or re-formed): ask for a new task"));
    }
    NoteRingCheckpointReport(*open, *slot, done);
    if (done.failed()) {
      // Ring: the collective failed on this member; nobody may keep the
      // step, every member restarts it from the committed state.
      if (!open->finalizing) {
        AbortOpenSteps(done.step(), false, "a member's collective failed",
                       member.id);
      }
      return absl::OkStatus();
    }
    if (!slot->pushed) {
      slot->pushed = true;
      AddStepReport(*open, member.id, done);
      if (done.has_weights_digest()) {
        OpenStep& step = *open;
        if (!step.digest.has_value()) {
          step.digest = done.weights_digest();
        } else {
          progress_.CountDigest(*step.digest == done.weights_digest());
        }
      }
      for (const v1::RangeDigest& d : done.range_digests()) {
        const auto [first, inserted] = open->range_digests.emplace(
            std::make_pair(d.begin(), d.end()), d.digest());
        if (!inserted) progress_.CountDigest(first->second == d.digest());
      }
      MaybeQueueFinalize(*open);
    }
    return absl::OkStatus();
  }
  // Async / SSP: a reported push was applied on every shard on arrival.
  if (member.leases.empty()) {
    return absl::AbortedError(
        absl::StrCat(member.id, " holds no task to report"));
  }
  recovery_.LogStep(tasks_applied_);  // async: one "step" per task
  for (const v1::DataTask& task : member.leases) {
    if (task.epoch() == queue_->epoch() &&
        queue_->Applied(task.task_id()).ok()) {
      progress_.AddApplied(task.end() - task.begin());
      recovery_.RecordApplied(tasks_applied_, task);
      Metrics()
          .samples(MetricRole::kCoordinator)
          .Increment(static_cast<double>(task.end() - task.begin()));
    }
  }
  Metrics().steps(MetricRole::kCoordinator).Increment();
  member.leases.clear();
  if (!member.applied_any) {
    member.applied_any = true;
    AddEvent("first_applied", member.id, member.tasks_done, 0,
             absl::StrCat(absl::ToDoubleSeconds(Now() - member.joined),
                          " s after joining"));
  }
  ++member.tasks_done;
  ++tasks_applied_;
  const ReportTimes times = TimesOf(done, Now());
  RecordAppliedTask(done, times.began, times.ended);
  if (options_.job.max_steps() > 0 &&
      tasks_applied_ >= options_.job.max_steps()) {
    if (async_barriers() && async_checked_tasks_ != tasks_applied_) {
      // The shards are checked and cut before the job's end is evaluated.
      if (!recovery_state_.needed()) recovery_state_.Require("job end");
    } else {
      FinishJob();
    }
  } else {
    AdvanceEpochIfComplete();
  }
  if (checkpoint_plan_.DueAfterTasks(tasks_applied_) &&
      !recovery_state_.needed()) {
    recovery_state_.Require(
        absl::StrCat(tasks_applied_, " tasks applied: async checkpoint"));
  }
  Persist();
  return absl::OkStatus();
}

void Coordinator::MaybeQueueFinalize(OpenStep& step) {
  steps_.QueueIfReady(step, options_.job.sync_quorum());
}

bool Coordinator::AdvanceEpochIfComplete() {
  if (recovery_state_.needed()) return true;  // after the recovery
  if (!queue_->complete()) return true;
  if (async_barriers() && async_checked_tasks_ != tasks_applied_) {
    // The shards are checked and checkpointed at the epoch's end first.
    recovery_state_.Require(absl::StrCat("epoch ", queue_->epoch(), " end"));
    return true;
  }
  if (queue_->epoch() + 1 < options_.job.epochs() &&
      EpochStartUnsaved(rules_.sync() ? steps_applied_ : tasks_applied_))
    return true;  // after the checkpoint (RetryOwedCheckpoint)
  v1::EpochAccounting acc;
  acc.set_epoch(queue_->epoch());
  acc.set_samples_applied(queue_->samples_applied());
  acc.set_samples_released(queue_->samples_released());
  acc.set_samples_dropped(queue_->num_samples() - queue_->samples_applied());
  accounting_.push_back(acc);
  const int64_t version = rules_.sync() ? steps_applied_ : 0;
  if (queue_->epoch() + 1 >= options_.job.epochs()) {
    FinishJob(queue_->epoch());
    return false;
  }
  evals_.QueueEpochEnd(version, queue_->epoch(), /*hold_steps=*/rules_.sync());
  QueueWorkerEpochEnd(version, queue_->epoch());
  queue_ = std::make_unique<EpochTaskQueue>(queue_->epoch() + 1,
                                            options_.epoch_size);
  // Steps of the finished epoch can no longer be rolled back into it.
  recovery_.ClearSteps();
  return true;
}

void Coordinator::FinishJob(int64_t epoch) {
  const int64_t version = rules_.sync() ? steps_applied_ : 0;
  if (evals_.EndTraining(version, epoch)) QueueWorkerFinal(version, epoch);
}

int64_t Coordinator::CommittedSteps() const {
  // Not the closed steps after it: a restart re-forms those (and an in-doubt
  // step of a ring job resolves as applied), so only steps_applied_ is final.
  return steps_applied_;
}

void Coordinator::AbortOpenSteps(int64_t from, bool include_finalizing,
                                 const std::string& why,
                                 const std::string& worker_id) {
  int64_t lost = 0;
  const std::vector<OpenStep> aborted =
      steps_.RemoveFrom(from, include_finalizing);
  for (const OpenStep& step : aborted) {
    for (const Slot& s : step.slots) {
      for (const v1::DataTask& t : s.tasks) {
        if (t.epoch() == queue_->epoch() && queue_->Release(t.task_id()).ok()) {
          lost += t.end() - t.begin();
        }
      }
    }
  }
  const int64_t count = static_cast<int64_t>(aborted.size());
  const int64_t first = aborted.empty() ? -1 : aborted.front().step;
  membership_.NextGeneration();
  recovery_state_.RaiseFence();
  if (count == 0) return;
  // Steps are numbered densely: the aborted ones are formed again.
  steps_.set_formed(steps_.open().empty() ? std::max(steps_applied_, first)
                                          : std::min(steps_.formed(), first));
  recovery_state_.CountAborted(count);
  // Shards may hold pushes of the aborted steps: rows (hybrid), some
  // members' gradients (a PS pipeline: a re-formed step must not take them
  // as the same members' new ones), or sums (sum on arrival). The finalizer
  // drops them (RecoverShards: a rollback of the open step) before any step
  // forms again.
  if (rules_.lost_member_aborts_step() &&
      rules_.shards_apply_finalized_steps() && !recovery_state_.needed()) {
    recovery_state_.Require(
        absl::StrCat("step ", first, " aborted: the shards drop its pushes"));
  }
  AddEvent(
      "step_aborted", worker_id, first, lost,
      absl::StrCat(why, " (", count, " open step", count == 1 ? "" : "s", ")"));
}

void Coordinator::ApplyStep(int64_t number) {
  OpenStep& step = steps_.open().at(number);
  recovery_.LogStep(number);
  for (const Slot& s : step.slots) {
    for (const v1::DataTask& t : s.tasks) {
      if (t.epoch() != queue_->epoch()) continue;
      if (s.pushed) {
        if (queue_->Applied(t.task_id()).ok()) {
          progress_.AddApplied(t.end() - t.begin());
          recovery_.RecordApplied(number, t);
        }
      } else {
        (void)queue_->Release(t.task_id());  // dropped by the quorum
      }
    }
    Member* m = membership_.Find(s.worker_id);
    if (s.pushed && m != nullptr && !m->applied_any) {
      m->applied_any = true;
      AddEvent("first_applied", s.worker_id, number, 0,
               absl::StrCat(absl::ToDoubleSeconds(Now() - m->joined),
                            " s after joining"));
    }
  }
  NoteRangesHeld(step);
  // The step ended when its last contributor's exchange did; a step the
  // coordinator applied on the shards itself (FinalizeStep, just returned)
  // ended no earlier than that.
  const absl::Time now = Now();
  absl::Time ended = step.ended.value_or(now);
  if (shards_ != nullptr && !LeaseNamesContributors(number)) {
    ended = std::max(ended, now);
  }
  RecordAppliedStep(step, std::min(step.began.value_or(ended), ended), ended);
  int64_t step_samples = 0;
  for (const Slot& s : step.slots) step_samples += s.pushed ? s.samples : 0;
  Metrics().steps(MetricRole::kCoordinator).Increment();
  Metrics()
      .samples(MetricRole::kCoordinator)
      .Increment(static_cast<double>(step_samples));
  steps_applied_ = number + 1;
  recovery_state_.ClearInDoubt();
  RecordRingCheckpoint(step);  // saves the state after the step
  steps_.open().erase(number);
}

void Coordinator::ResolveInDoubt(bool applied) {
  const v1::AppliedStep& in_doubt = *recovery_state_.in_doubt();
  const int64_t number = in_doubt.step();
  if (steps_.Find(number) != nullptr) {
    if (applied) ApplyStep(number);  // else AbortOpenSteps releases it
    recovery_state_.ClearInDoubt();
    return;
  }
  // Resumed from the saved state: the step's tasks are leased.
  recovery_.LogStep(number);
  for (const v1::DataTask& t : in_doubt.tasks()) {
    if (t.epoch() != queue_->epoch()) continue;
    if (!applied) {
      (void)queue_->Release(t.task_id());
    } else if (queue_->Applied(t.task_id()).ok()) {
      progress_.AddApplied(t.end() - t.begin());
      Metrics()
          .samples(MetricRole::kCoordinator)
          .Increment(static_cast<double>(t.end() - t.begin()));
      recovery_.RecordApplied(number, t);
    }
  }
  if (applied) {
    Metrics().steps(MetricRole::kCoordinator).Increment();
    steps_applied_ = number + 1;
    AddEvent("step_recovered", "", number, 0,
             "applied everywhere before the restart");
  } else {
    recovery_.Forget(number);
  }
  recovery_state_.ClearInDoubt();
}

void Coordinator::FinalizerLoop() {
  while (true) {
    const FinalizerAction action = NextFinalizerAction();
    switch (action.kind) {
      case FinalizerAction::Kind::kStop:
        return;
      case FinalizerAction::Kind::kWatchShards:
        WatchShards();
        break;
      case FinalizerAction::Kind::kFence:
        FenceShards(action.generation);
        break;
      case FinalizerAction::Kind::kRecover:
        RecoverShards(action.why);
        break;
      case FinalizerAction::Kind::kFinalizeStep:
        RunFinalizeStep(action);
        break;
    }
  }
}

FinalizerAction Coordinator::NextFinalizerAction() {
  using Kind = FinalizerAction::Kind;
  FinalizerAction action;
  absl::MutexLock lock(&mu_);
  const bool woken = mu_.AwaitWithTimeout(
      absl::Condition(
          +[](Coordinator* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
            return c->stopping_ || !c->steps_.queue_empty() ||
                   c->recovery_state_.needed() || c->FenceDue();
          },
          this),
      kShardWatchInterval);
  if (stopping_) {
    action.kind = Kind::kStop;
  } else if (!woken) {
    // Idle: a shard that restarted behind the job stalls every worker's
    // pull or push without any step reaching the finalizer. Look.
    action.kind = Kind::kWatchShards;
  } else if (FenceDue()) {
    action.kind = Kind::kFence;
    action.generation = membership_.generation();
  } else if (recovery_state_.needed()) {
    action.kind = Kind::kRecover;
    action.why = recovery_state_.why();
  } else {
    const int64_t number = steps_.NextQueued();
    action.kind = Kind::kFinalizeStep;
    action.number = number;
    const OpenStep& step = steps_.open().at(number);
    // Hybrid: the generation the step was formed in, so that a join since
    // then (which aborts nothing in a ring) does not fence off the pushes
    // of the steps formed before it; an abort removes those steps first.
    action.generation = rules_.ring_beside_shards() ? step.ring_generation
                                                    : membership_.generation();
    v1::AppliedStep doubt;
    doubt.set_step(number);
    for (const Slot& s : step.slots) {
      // A ring member without samples (hybrid) pushed nothing there; a
      // PS pipeline stage did.
      if (!s.pushed || (s.samples == 0 && !rules_.pushes_without_samples()))
        continue;
      v1::Contributor c;
      c.set_worker_id(s.worker_id);
      c.set_num_samples(s.samples);
      action.contributors.push_back(c);
      for (const v1::DataTask& t : s.tasks) *doubt.add_tasks() = t;
    }
    recovery_state_.SetInDoubt(std::move(doubt));
    action.forced_checkpoint = checkpoint_plan_.TakeForced(number);
    Persist();  // a restart must know this step may have been applied
  }
  return action;
}

void Coordinator::RunFinalizeStep(const FinalizerAction& action) {
  const int64_t number = action.number;
  // A forced checkpoint (ForceCheckpointIfNoCopyLeft): the shards are
  // still at version `number` (its leases named no set).
  if (action.forced_checkpoint) {
    MaybeCheckpoint(number, /*epoch_end=*/false, /*forced=*/true);
  }
  // Ring mode without shards: the members applied the step themselves.
  const absl::Status status =
      shards_ == nullptr ? absl::OkStatus()
                         : shards_->FinalizeStep(number, action.generation,
                                                 action.contributors);
  if (!status.ok()) {
    if (absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status)) {
      // Shards unreachable or restarting: retry the same step shortly.
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.shard_retry);
      return;
    }
    // A shard lost the step (it restarted from a checkpoint), or applied
    // it on push over another contributor set (a worker this step dropped
    // had pushed there): bring all shards and the accounting back to one
    // consistent step.
    {
      absl::MutexLock lock(&mu_);
      recovery_state_.Require();  // no step forms meanwhile
      // Shards at number + 1 may hold another set's update: undo it.
      if (absl::IsAlreadyExists(status) &&
          recovery_state_.in_doubt().has_value())
        ResolveInDoubt(false);
    }
    RecoverShards(std::string(status.message()));
    return;
  }
  bool epoch_end = false;
  {
    absl::MutexLock lock(&mu_);
    steps_.Dequeue(number);
    ApplyStep(number);
    epoch_end = queue_->complete();
  }
  FlushMetrics();
  MaybeCheckpoint(number + 1, epoch_end);
  std::vector<Reply> replies;
  {
    absl::MutexLock lock(&mu_);
    if (options_.job.max_steps() > 0 &&
        steps_applied_ >= options_.job.max_steps()) {
      FinishJob();
    } else {
      AdvanceEpochIfComplete();
    }
    Persist();
    ServeWaiters(replies, false);
  }
  ParkedCalls::Send(replies);
}

// Step formation: members, shares and the ring a step's leases carry.

bool Coordinator::FormStep(int max_open) {
  if (evals_.training_done() || recovery_state_.needed() ||
      evals_.steps_held() || StepsWaitForWorkerEval())
    return false;
  const v1::JobSpec& job = options_.job;
  if (job.max_steps() > 0 && steps_.formed() >= job.max_steps()) return false;
  // At most `max_open` steps collecting reports.
  if (steps_.Collecting() >= max_open) return false;
  if (queue_->remaining() == 0) return false;  // last tasks in flight
  const std::vector<const Member*> ranked = membership_.Ranked();
  // A ring none of whose members holds the job's state goes back first
  // (the queue then holds the undone steps' tasks again).
  const std::optional<int64_t> restore = ResumeRingIfStateLost(ranked);
  if (recovery_state_.needed()) return false;  // hybrid: the shards first
  const int64_t available =
      std::min<int64_t>(job.global_batch(), queue_->remaining());
  if (available == 0) return false;  // the epoch's last tasks are in flight
  OpenStep step;
  step.restore = restore;
  step.checkpoint = RingCheckpointDue(available, queue_->remaining());
  step.epoch = queue_->epoch();
  step.ring_generation = membership_.generation();
  step.fence = recovery_state_.fence();
  // Hybrid: a version the shards will be checkpointed at (a multiple of
  // checkpoint_every, or an epoch's start, see MaybeCheckpoint) must be
  // restorable on the ring too.
  // A forced checkpoint's step, or the same step formed again.
  const bool forced =
      rules_.ring_beside_shards() && checkpoint_plan_.ForcedAt(steps_.formed());
  step.keep_state =
      rules_.ring_beside_shards() &&
      checkpoint_plan_.KeepsState(steps_.formed(),
                                  queue_->remaining() == queue_->num_samples());
  const int64_t w = static_cast<int64_t>(ranked.size());
  const int64_t trained = rules_.TrainedMembers(w);
  if (trained == 0) {
    if (replica_wait_logged_ != membership_.generation()) {
      replica_wait_logged_ = membership_.generation();
      LogInfo("waiting for a whole pipeline replica (worker memory budget)",
              {{"members", w}, {"stages", job.pipeline_stages()}});
    }
    return false;
  }
  const int64_t kept = rules_.MembersKeptWithoutSamples(trained);
  for (int64_t r = 0; r < w; ++r) {
    const int64_t share =
        r < trained ? available / trained + (r < available % trained ? 1 : 0)
                    : 0;
    if (share == 0 && !rules_.KeepsMemberWithoutSamples(r, kept)) continue;
    Slot slot;
    slot.worker_id = ranked[r]->id;
    slot.tasks = queue_->Lease(share);
    for (const v1::DataTask& t : slot.tasks)
      slot.samples += t.end() - t.begin();
    step.slots.push_back(std::move(slot));
  }
  if (forced) {  // ForceCheckpointIfNoCopyLeft
    checkpoint_plan_.MarkForced(steps_.formed());
  }
  steps_.Add(std::move(step));
  return true;
}

bool Coordinator::LeaseNamesContributors(int64_t step) const {
  // The shards must still be at version `step` when the coordinator
  // checkpoints it (after applying step - 1).
  return rules_.finalize_on_push() && !checkpoint_plan_.AtStep(step);
}

void Coordinator::ForceCheckpointIfNoCopyLeft() {
  // Nothing to force, or a forced checkpoint is on its way already.
  if (!rules_.ring_beside_shards() || !checkpoint_plan_.on() ||
      checkpoint_plan_.forcing()) {
    return;
  }
  const int64_t latest = recovery_.latest_checkpoint();
  if (latest < 0) return;
  for (const Member* m : membership_.Ranked()) {
    const std::vector<int64_t>& kept = m->kept_states;
    if (std::find(kept.begin(), kept.end(), latest) != kept.end()) return;
  }
  checkpoint_plan_.ForceNext();
  AddEvent("checkpoint_forced", "", steps_.formed(), 0,
           absl::StrCat("no member holds the dense state of checkpoint ",
                        latest, ": the next step is checkpointed"));
}

void Coordinator::AddRing(const OpenStep& step, size_t slot_index,
                          v1::NextTaskResponse& r) const {
  int64_t samples = 0;
  for (const Slot& slot : step.slots) {
    v1::RingMember* m = r.add_ring();
    m->set_worker_id(slot.worker_id);
    if (rules_.members_carry_their_tasks()) {
      for (const v1::DataTask& t : slot.tasks) *m->add_tasks() = t;
    }
    if (const Member* member = membership_.Find(slot.worker_id))
      m->set_peer_address(member->info.peer_address());
    samples += slot.samples;
  }
  r.set_rank(static_cast<int32_t>(slot_index));
  r.set_step_samples(samples);
  r.set_ring_generation(step.ring_generation);
}

// WAIT, with the committed steps (also a parked call's answer at the end
// of its long poll).
v1::NextTaskResponse Coordinator::Waiting() const {
  v1::NextTaskResponse wait;
  wait.set_action(v1::NextTaskResponse::WAIT);
  wait.set_generation(membership_.generation());
  wait.set_committed_steps(CommittedSteps());
  return wait;
}

// A report-only call's answer now (Waiting()), or nullopt while the step it
// reported with await_applied is open, unless kMaxParkedLeasesPerWorker
// calls of that worker wait already.
std::optional<v1::NextTaskResponse> Coordinator::ReportAnswer(
    const v1::NextTaskRequest& request) const {
  if (request.await_applied() && rules_.sync()) {
    // Still open under the fence it was reported in: applied or aborted
    // later (the parked call is answered then, or at its long poll's end).
    const OpenStep* open = steps_.Find(request.done().step());
    if (open != nullptr && open->fence == request.done().fence() &&
        parked_.Count(request.worker_id()) < kMaxParkedLeasesPerWorker) {
      return std::nullopt;
    }
  }
  return Waiting();
}

}  // namespace ferry

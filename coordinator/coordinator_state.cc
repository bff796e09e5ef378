// The coordinator's persisted state: save after every change that matters,
// resume after a restart (see coordinator.h).
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "coordinator/coordinator.h"

namespace ferry {

v1::CoordinatorState Coordinator::SaveState() const {
  v1::CoordinatorState s;
  s.set_format(CoordinatorPersistence::kFormat);
  *s.mutable_job() = options_.job;
  membership_.SaveTo(s);
  recovery_state_.SaveTo(s);
  *s.mutable_queue() = queue_->ToProto();
  for (const v1::EpochAccounting& a : accounting_) *s.add_accounting() = a;
  s.set_steps_applied(steps_applied_);
  s.set_tasks_applied(tasks_applied_);
  progress_.SaveTo(s);
  evals_.SaveTo(s);
  worker_evals_.SaveTo(s);
  recovery_.SaveTo(s);
  s.set_start_unix_seconds(start_unix_);
  s.set_optimizer_slices(optimizer_slices_);
  events_.SaveTo(s);
  return s;
}

void Coordinator::StateSaved(const absl::Status& status) {
  if (status.ok()) {
    if (state_error_.empty()) return;
    state_error_.clear();
    LogInfo("saving the coordinator state works again");
    AddEvent("state_saved", "", steps_applied_, 0,
             "saving the coordinator state works again");
    return;
  }
  if (!state_error_.empty()) return;  // said once per run of failures
  state_error_ = absl::StrCat(
      "saving the coordinator state in ", options_.state_dir,
      " failed: ", status.message(),
      "; training goes on, but a restart would resume from the state saved "
      "before");
  LogError(state_error_);
  AddEvent("state_save_failed", "", steps_applied_, 0,
           std::string(status.message()));
}

void Coordinator::Persist() {
  if (!persistence_.enabled()) return;
  const absl::Status written = persistence_.Save(SaveState());
  if (!written.ok()) {
    StateSaved(written);
    return;
  }
  if (!state_unsynced_) StateSaved(absl::OkStatus());
  last_state_write_ = Now();  // ferry_checkpoint_age_seconds
  state_unsynced_ = true;
  if (options_.state_sync_interval <= absl::ZeroDuration()) SyncStateNow();
}

void Coordinator::PersistDurably() {
  Persist();
  SyncStateNow();
}

void Coordinator::SyncStateNow() {
  if (!state_unsynced_) return;
  const absl::Status synced = persistence_.Sync();
  StateSaved(synced);
  if (!synced.ok()) return;
  state_unsynced_ = false;
  last_state_sync_ = Now();
}

void Coordinator::SyncStateIfDue() {
  if (!state_unsynced_ ||
      Now() - last_state_sync_ < options_.state_sync_interval) {
    return;
  }
  // Saves while the fsync runs set state_unsynced_ again: the next round
  // syncs them.
  state_unsynced_ = false;
  last_state_sync_ = Now();
  mu_.Unlock();
  const absl::Status synced = persistence_.Sync();
  mu_.Lock();
  if (!synced.ok()) state_unsynced_ = true;
  StateSaved(synced);
}

absl::Status Coordinator::LoadState(const v1::CoordinatorState& s) {
  if (s.job().SerializeAsString() != options_.job.SerializeAsString()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the saved coordinator state in ", options_.state_dir, " is for job '",
        s.job().job_id(),
        "' with other settings; remove it or use another --state-dir"));
  }
  ASSIGN_OR_RETURN(EpochTaskQueue queue, EpochTaskQueue::FromProto(s.queue()));
  queue_ = std::make_unique<EpochTaskQueue>(std::move(queue));
  membership_.LoadFrom(s, Now());
  accounting_.assign(s.accounting().begin(), s.accounting().end());
  steps_applied_ = s.steps_applied();
  steps_.set_formed(s.steps_applied());
  tasks_applied_ = s.tasks_applied();
  progress_.LoadFrom(s);
  evals_.LoadFrom(s);
  worker_evals_.LoadFrom(s);
  recovery_.LoadFrom(s);
  recovery_state_.LoadFrom(s);
  start_unix_ = s.start_unix_seconds();
  optimizer_slices_ = s.optimizer_slices();
  events_.LoadFrom(s);
  // Every lease of the old run is void (open steps were not saved), except
  // the step in doubt, which RecoverShards settles.
  v1::TaskQueueState saved = s.queue();
  for (const v1::DataTask& t : saved.leased()) {
    bool doubtful = false;
    if (const auto& in_doubt = recovery_state_.in_doubt()) {
      for (const v1::DataTask& d : in_doubt->tasks())
        doubtful |= d.task_id() == t.task_id();
    }
    if (!doubtful) (void)queue_->Release(t.task_id());
  }
  membership_.NextGeneration();
  // Async: pushes of the void leases may have reached the shards; the
  // barrier finds them and goes back to a consistent cut.
  if (async_barriers() && !s.training_done()) {
    recovery_state_.Require("coordinator restarted");
  }
  if (s.training_done()) FinishJob();  // evaluates again and ends
  AddEvent("coordinator_restarted", "", steps_applied_, 0,
           absl::StrCat(membership_.size(), " members kept, restart ",
                        recovery_state_.restarts()));
  return absl::OkStatus();
}

absl::Status Coordinator::Resume() {
  ASSIGN_OR_RETURN(std::optional<v1::CoordinatorState> state,
                   persistence_.Load());
  if (!state.has_value()) {
    Persist();  // a fresh job: save its start
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(LoadState(*state));
  LogInfo("coordinator resumed", {{"path", persistence_.path()},
                                  {"epoch", queue_->epoch()},
                                  {"steps_applied", steps_applied_},
                                  {"members", membership_.size()}});
  Persist();
  return absl::OkStatus();
}

}  // namespace ferry

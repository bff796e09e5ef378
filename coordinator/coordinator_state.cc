// The coordinator's persisted state: save after every change that matters,
// resume after a restart (see coordinator.h).
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "coordinator/coordinator.h"

namespace ferry {
namespace {

double UnixSeconds(absl::Time t) {
  return absl::ToDoubleSeconds(t - absl::UnixEpoch());
}
absl::Time FromUnixSeconds(double s) {
  return absl::UnixEpoch() + absl::Seconds(s);
}

v1::ThroughputWindowState WindowToProto(const ThroughputWindow::State& w) {
  v1::ThroughputWindowState p;
  if (w.first.has_value()) {
    p.set_has_first(true);
    p.set_first_end_unix_seconds(UnixSeconds(w.first->ended));
    p.set_first_samples(w.first->samples);
    p.set_first_reports(w.first->reports);
    p.set_first_compute_seconds(w.first->compute_seconds);
    p.set_first_comm_seconds(w.first->comm_seconds);
  }
  if (w.last_end.has_value()) {
    p.set_last_end_unix_seconds(UnixSeconds(*w.last_end));
  }
  if (w.earliest_began.has_value()) {
    p.set_earliest_began_unix_seconds(UnixSeconds(*w.earliest_began));
  }
  p.set_steps(w.inside.steps);
  p.set_samples(w.inside.samples);
  p.set_reports(w.inside.reports);
  p.set_compute_seconds(w.inside.compute_seconds);
  p.set_comm_seconds(w.inside.comm_seconds);
  return p;
}

ThroughputWindow::State WindowFromProto(const v1::ThroughputWindowState& p) {
  ThroughputWindow::State w;
  if (p.has_first()) {
    w.first = TimedStep{.ended = FromUnixSeconds(p.first_end_unix_seconds()),
                        .began = std::nullopt,
                        .samples = p.first_samples(),
                        .reports = p.first_reports(),
                        .compute_seconds = p.first_compute_seconds(),
                        .comm_seconds = p.first_comm_seconds()};
    w.last_end = FromUnixSeconds(p.last_end_unix_seconds());
    w.earliest_began = FromUnixSeconds(p.earliest_began_unix_seconds());
  }
  w.inside.steps = p.steps();
  w.inside.samples = p.samples();
  w.inside.reports = p.reports();
  w.inside.compute_seconds = p.compute_seconds();
  w.inside.comm_seconds = p.comm_seconds();
  return w;
}

}  // namespace

v1::CoordinatorState Coordinator::SaveState() const {
  v1::CoordinatorState s;
  s.set_format(CoordinatorPersistence::kFormat);
  *s.mutable_job() = options_.job;
  membership_.SaveTo(s);
  s.set_fence(fence_);
  *s.mutable_queue() = queue_->ToProto();
  for (const v1::EpochAccounting& a : accounting_) *s.add_accounting() = a;
  s.set_steps_applied(steps_applied_);
  s.set_tasks_applied(tasks_applied_);
  s.set_samples_applied_total(samples_applied_total_);
  evals_.SaveTo(s);
  recovery_.SaveTo(s);
  if (in_doubt_.has_value()) {
    *s.mutable_in_doubt() = *in_doubt_;
  }
  s.set_start_unix_seconds(start_unix_);
  events_.SaveTo(s);
  s.set_aborted_steps(aborted_steps_);
  s.set_rollbacks(rollbacks_);
  s.set_restarts(restarts_);
  s.set_compute_seconds(compute_seconds_);
  s.set_comm_seconds(comm_seconds_);
  s.set_unique_ids(unique_ids_);
  for (const auto& [key, totals] : pipeline_totals_) *s.add_pipeline() = totals;
  *s.mutable_window() = WindowToProto(window_.state());
  s.set_digest_checks(digest_checks_);
  s.set_digest_mismatches(digest_mismatches_);
  return s;
}

void Coordinator::Persist() {
  if (!persistence_.enabled()) return;
  const absl::Status written = persistence_.Save(SaveState());
  if (!written.ok()) {
    LogError("saving the coordinator state failed", {{"error", written}});
  } else {
    last_state_write_ = Now();  // ferry_checkpoint_age_seconds
  }
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
  samples_applied_total_ = s.samples_applied_total();
  evals_.LoadFrom(s);
  recovery_.LoadFrom(s);
  if (s.has_in_doubt()) in_doubt_ = s.in_doubt();
  start_unix_ = s.start_unix_seconds();
  events_.LoadFrom(s);
  aborted_steps_ = s.aborted_steps();
  rollbacks_ = s.rollbacks();
  restarts_ = s.restarts() + 1;
  compute_seconds_ = s.compute_seconds();
  unique_ids_ = s.unique_ids();
  pipeline_totals_.clear();
  for (const v1::PipelineStageTotals& t : s.pipeline()) {
    pipeline_totals_[{t.stages() == 1, t.stage()}] = t;
  }
  comm_seconds_ = s.comm_seconds();
  window_ = ThroughputWindow(WindowFromProto(s.window()));
  digest_checks_ = s.digest_checks();
  digest_mismatches_ = s.digest_mismatches();
  // Every lease of the old run is void (open steps were not saved), except
  // the step in doubt, which RecoverShards settles.
  v1::TaskQueueState saved = s.queue();
  for (const v1::DataTask& t : saved.leased()) {
    bool doubtful = false;
    if (in_doubt_.has_value()) {
      for (const v1::DataTask& d : in_doubt_->tasks())
        doubtful |= d.task_id() == t.task_id();
    }
    if (!doubtful) (void)queue_->Release(t.task_id());
  }
  membership_.NextGeneration();
  // Above every fence the old run handed out: the members' leases of it
  // are void, and a prefetch that names one is answered with a re-formed
  // step, not parked behind it.
  fence_ = s.fence() + 1;
  if (s.training_done()) FinishJob();  // evaluates again and ends
  recovery_needed_ = true;
  recovery_why_ = "the coordinator restarted";
  AddEvent(
      "coordinator_restarted", "", steps_applied_, 0,
      absl::StrCat(membership_.size(), " members kept, restart ", restarts_));
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

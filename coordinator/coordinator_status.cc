// The coordinator's read-only views: status, progress figures, the end.
#include <algorithm>

#include "coordinator/coordinator.h"

namespace ferry {

void Coordinator::CountBytes(const std::string& role, int64_t sent,
                             int64_t received) {
  absl::MutexLock lock(&mu_);
  (*own_bytes_.mutable_sent())[role] += sent;
  (*own_bytes_.mutable_received())[role] += received;
}

bool Coordinator::finished() const {
  absl::MutexLock lock(&mu_);
  return evals_.finished();
}

bool Coordinator::WaitUntilFinished(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(
      absl::Condition(
          +[](const Coordinator* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
            return c->evals_.finished();
          },
          this),
      timeout);
}

v1::StatusResponse Coordinator::Status() const {
  absl::MutexLock lock(&mu_);
  v1::StatusResponse s;
  *s.mutable_job() = options_.job;
  s.set_generation(membership_.generation());
  const absl::Time now = Now();
  for (const auto& [id, m] : membership_.members()) {
    v1::MemberStatus* ms = s.add_members();
    ms->set_worker_id(id);
    ms->set_peer_address(m.info.peer_address());
    ms->set_hostname(m.info.hostname());
    ms->set_pid(m.info.pid());
    ms->set_steps(m.tasks_done);
    ms->set_seconds_since_heartbeat(
        absl::ToDoubleSeconds(now - m.last_heartbeat));
    (*s.mutable_worker_bytes())[id] = m.bytes;
    (*s.mutable_worker_peer_bytes())[id] = m.peer_bytes;
  }
  for (const auto& [id, bytes] : membership_.departed_bytes()) {
    if (!s.worker_bytes().contains(id)) (*s.mutable_worker_bytes())[id] = bytes;
  }
  for (const auto& [id, bytes] : membership_.departed_peer_bytes()) {
    if (!s.worker_peer_bytes().contains(id))
      (*s.mutable_worker_peer_bytes())[id] = bytes;
  }
  const bool sync = rules_.sync();
  s.set_step(sync ? steps_applied_ : tasks_applied_);
  s.set_epoch(queue_->epoch());
  s.set_epoch_progress(static_cast<double>(queue_->samples_applied()) /
                       queue_->num_samples());
  s.set_train_loss(recent_loss_);
  const absl::Time end = evals_.finish_time().value_or(now);
  const WindowFigures w = window_.figures();
  s.set_samples_per_second(w.samples_per_second());
  if (const std::optional<absl::Time> first = window_.first_end()) {
    s.set_startup_seconds(absl::ToDoubleSeconds(*first - absl::UnixEpoch()) -
                          start_unix_);
  }
  s.set_window_seconds(w.seconds);
  s.set_window_samples(w.samples);
  s.set_window_steps(w.steps);
  s.set_step_seconds(w.step_seconds());
  s.set_window_reports(w.reports);
  s.set_window_compute_seconds(w.compute_seconds);
  s.set_window_comm_seconds(w.comm_seconds);
  s.set_window_work_seconds(w.work_seconds);
  evals_.FillStatus(s);
  s.set_wall_seconds(absl::ToDoubleSeconds(end - start_));
  s.set_samples_applied(samples_applied_total_);
  for (const v1::EpochAccounting& a : accounting_) *s.add_accounting() = a;
  s.set_workers_seen(membership_.workers_seen());
  *s.mutable_coordinator_bytes() = own_bytes_;
  s.set_compute_seconds(compute_seconds_);
  s.set_unique_ids(unique_ids_);
  for (const auto& [key, totals] : pipeline_totals_) *s.add_pipeline() = totals;
  s.set_comm_seconds(comm_seconds_);
  s.set_digest_checks(digest_checks_);
  s.set_digest_mismatches(digest_mismatches_);
  events_.FillStatus(s);
  s.set_aborted_steps(aborted_steps_);
  s.set_rollbacks(rollbacks_);
  s.set_checkpoint_version(recovery_.latest_checkpoint());
  s.set_restarts(restarts_);
  s.set_error(error_);
  return s;
}

}  // namespace ferry

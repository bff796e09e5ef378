// The coordinator's read-only views: status, progress figures, the end.
#include <algorithm>

#include "coordinator/coordinator.h"

namespace ferry {

void Coordinator::CountBytes(const std::string& role, int64_t sent,
                             int64_t received) {
  absl::MutexLock lock(&mu_);
  progress_.CountBytes(role, sent, received);
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
  const absl::Time end = evals_.finish_time().value_or(now);
  progress_.FillStatus(s, start_unix_);
  evals_.FillStatus(s);
  s.set_wall_seconds(absl::ToDoubleSeconds(end - start_));
  for (const v1::EpochAccounting& a : accounting_) *s.add_accounting() = a;
  s.set_workers_seen(membership_.workers_seen());
  events_.FillStatus(s);
  recovery_state_.FillStatus(s);
  s.set_checkpoint_version(recovery_.latest_checkpoint());
  s.set_error(error_);
  s.set_state_error(state_error_);
  return s;
}

}  // namespace ferry

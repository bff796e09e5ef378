#include "coordinator/job_events.h"

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace ferry {

void JobEvents::Add(absl::Time now, const std::string& kind,
                    const std::string& worker_id, int64_t step,
                    int64_t samples_lost, const std::string& detail) {
  v1::JobEvent e;
  e.set_unix_seconds(absl::ToDoubleSeconds(now - absl::UnixEpoch()));
  e.set_kind(kind);
  e.set_worker_id(worker_id);
  e.set_step(step);
  e.set_samples_lost(samples_lost);
  e.set_detail(detail);
  LogInfo(absl::StrCat(
      kind, worker_id.empty() ? "" : " ", worker_id, " at step ", step,
      samples_lost > 0 ? absl::StrCat(", ", samples_lost, " samples lost") : "",
      detail.empty() ? "" : ": ", detail));
  events_.push_back(std::move(e));
  if (events_.size() > kMaxEvents) events_.pop_front();
}

void JobEvents::FillStatus(v1::StatusResponse& status) const {
  for (const v1::JobEvent& e : events_) *status.add_events() = e;
}

void JobEvents::SaveTo(v1::CoordinatorState& state) const {
  for (const v1::JobEvent& e : events_) *state.add_events() = e;
}

void JobEvents::LoadFrom(const v1::CoordinatorState& state) {
  events_.assign(state.events().begin(), state.events().end());
}

}  // namespace ferry

// JobEvents: the job's event log (joins, departures, aborted steps,
// rollbacks, restarts, forced checkpoints) that StatusResponse.events shows
// and the state file keeps: the newest kMaxEvents, oldest first. Every
// event is also written as a log line.
//
// Ownership: plain value type.
// Thread safety: not thread-safe. The Coordinator holds it as a field
// guarded by its mutex (ABSL_GUARDED_BY(mu_)).
#ifndef FERRY_COORDINATOR_JOB_EVENTS_H_
#define FERRY_COORDINATOR_JOB_EVENTS_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

#include "absl/time/time.h"
#include "ferry/v1/coordinator.pb.h"
#include "ferry/v1/coordinator_state.pb.h"

namespace ferry {

class JobEvents {
 public:
  // Events kept; an event past it drops the oldest.
  static constexpr size_t kMaxEvents = 1000;

  // Records an event of `kind` at `now` (`worker_id` empty for the job's
  // own; `samples_lost` > 0 when samples went back to the queue).
  void Add(absl::Time now, const std::string& kind,
           const std::string& worker_id, int64_t step, int64_t samples_lost,
           const std::string& detail);
  const std::deque<v1::JobEvent>& events() const { return events_; }

  // StatusResponse.events / CoordinatorState.events: every kept event,
  // oldest first.
  void FillStatus(v1::StatusResponse& status) const;
  void SaveTo(v1::CoordinatorState& state) const;
  // Replaces the log with the saved one.
  void LoadFrom(const v1::CoordinatorState& state);

 private:
  std::deque<v1::JobEvent> events_;
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_JOB_EVENTS_H_

#include "ps/pull_waiters.h"

#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/peer_limits.h"
#include "common/prometheus_metrics.h"

namespace ferry {

absl::StatusOr<PullWaitId> PullWaiters::Add(int64_t min_version,
                                            ReadyCallback ready,
                                            int64_t max_pending) {
  const int64_t pending = size();
  if (pending >= max_pending) {
    return LimitExceeded("the number of pending pulls", pending + 1,
                         max_pending);
  }
  const PullWaitId id = next_id_++;
  // ferry_pull_seconds: how long the pull waited for its version.
  ReadyCallback timed =
      [begun = absl::Now(), ready = std::move(ready)](
          absl::StatusOr<std::shared_ptr<const PsSnapshot>> s) {
        if (s.ok())
          Metrics().pull_seconds(MetricRole::kPs).Observe(SecondsSince(begun));
        ready(std::move(s));
      };
  waiters_.emplace(id, Waiter{min_version, std::move(timed)});
  return id;
}

bool PullWaiters::Cancel(PullWaitId id) { return waiters_.erase(id) > 0; }

void PullWaiters::TakeReady(int64_t version,
                            const std::shared_ptr<const PsSnapshot>& snapshot,
                            ReadyList& ready) {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->second.min_version <= version) {
      ready.emplace_back(std::move(it->second.ready), snapshot);
      waiters_.erase(it++);
    } else {
      ++it;
    }
  }
}

void PullWaiters::TakeAll(std::vector<ReadyCallback>& taken) {
  for (auto& [id, waiter] : waiters_) taken.push_back(std::move(waiter.ready));
  waiters_.clear();
}

void PullWaiters::ShutDown(std::vector<ReadyCallback>& taken) {
  shut_down_ = true;
  TakeAll(taken);
}

}  // namespace ferry

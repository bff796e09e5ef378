#include "ps/shard_counters.h"

#include <algorithm>

#include "common/prometheus_metrics.h"

namespace ferry {

void PushCounters::RecordStaleness(int64_t steps) {
  counts_.max_staleness = std::max(counts_.max_staleness, steps);
  counts_.sum_staleness += steps;
  Metrics().staleness_steps().Set(static_cast<double>(steps));
  Metrics().push_staleness_steps().Observe(static_cast<double>(steps));
}

void PeerBytes::Add(absl::string_view role, int64_t sent, int64_t received) {
  absl::MutexLock lock(&mu_);
  const std::string key(role);
  if (sent != 0) sent_[key] += sent;
  if (received != 0) received_[key] += received;
}

void PeerBytes::CopyTo(std::map<std::string, int64_t>& sent,
                       std::map<std::string, int64_t>& received) const {
  absl::MutexLock lock(&mu_);
  sent = sent_;
  received = received_;
}

}  // namespace ferry

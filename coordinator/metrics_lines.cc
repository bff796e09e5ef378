#include "coordinator/metrics_lines.h"

#include <algorithm>
#include <set>
#include <string>

namespace ferry {

std::vector<MetricsLines::Point> MetricsLines::Take() {
  std::vector<Point> points;
  points.swap(points_);
  return points;
}

double MetricsLines::StepSeconds(absl::Time began, absl::Time ended) {
  const double seconds =
      absl::ToDoubleSeconds(ended - last_step_end_.value_or(began));
  last_step_end_ = std::max(last_step_end_.value_or(ended), ended);
  return seconds;
}

void AddWorkerBytes(StepMetrics& m, const OpenStep* step,
                    const Membership& membership) {
  std::set<std::string> counted;
  auto add = [&](const std::string& id, const v1::ByteCounts& bytes,
                 const v1::ByteCounts& peers) {
    if (bytes.sent().empty() && bytes.received().empty()) return;
    if (!counted.insert(id).second) return;
    for (const auto& [role, n] : bytes.sent()) {
      m.bytes_sent += n;
      (role == "coordinator" ? m.control_bytes_sent : m.data_bytes_sent) += n;
    }
    for (const auto& [role, n] : bytes.received()) {
      m.bytes_received += n;
      (role == "coordinator" ? m.control_bytes_received
                             : m.data_bytes_received) += n;
    }
    for (const auto& [peer, n] : peers.sent()) m.peers[peer].sent += n;
    for (const auto& [peer, n] : peers.received()) m.peers[peer].received += n;
    for (const auto& [peer, n] : peers.calls()) m.peers[peer].calls += n;
  };
  if (step != nullptr) {
    for (const auto& [id, counts] : step->reported_bytes)
      add(id, counts.first, counts.second);
  }
  for (const auto& [id, member] : membership.members())
    add(id, member.bytes, member.peer_bytes);
  const auto& departed_peers = membership.departed_peer_bytes();
  for (const auto& [id, bytes] : membership.departed_bytes()) {
    const auto peers = departed_peers.find(id);
    add(id, bytes,
        peers == departed_peers.end() ? v1::ByteCounts::default_instance()
                                      : peers->second);
  }
  m.bytes_workers = static_cast<int64_t>(counted.size());
}

}  // namespace ferry

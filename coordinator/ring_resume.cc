#include "coordinator/ring_resume.h"

#include <algorithm>

namespace ferry {

std::optional<RingResumePoint> RingResumeTarget(
    const std::vector<int64_t>& checkpoints, int64_t applied,
    int64_t log_from) {
  for (auto it = checkpoints.rbegin(); it != checkpoints.rend(); ++it) {
    if (*it > applied) continue;  // of steps undone since
    if (*it >= log_from) return RingResumePoint{*it, true};
    break;  // older ones are further before the log
  }
  if (log_from == 0) return RingResumePoint{0, false};
  return std::nullopt;
}

bool RingLostTheJobState(const std::vector<const Membership::Member*>& members,
                         int64_t applied) {
  if (applied == 0 || members.empty()) return false;
  return std::none_of(
      members.begin(), members.end(),
      [](const Membership::Member* m) { return m->applied_any; });
}

bool RingLostAHeldRange(const std::vector<const Membership::Member*>& members,
                        int ranges, int64_t applied) {
  if (applied == 0 || members.empty()) return false;
  for (int range = 0; range < ranges; ++range) {
    const bool held = std::any_of(
        members.begin(), members.end(), [range](const Membership::Member* m) {
          return std::find(m->held_ranges.begin(), m->held_ranges.end(),
                           range) != m->held_ranges.end();
        });
    if (!held) return true;
  }
  return false;
}

}  // namespace ferry

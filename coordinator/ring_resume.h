// Where a ring job goes on when none of its members holds the job's state
// (every member that took part in an applied step is gone: all killed at
// once, a node drained, a rolling update): the newest complete ring
// checkpoint whose steps' tasks the coordinator can still put back in the
// queue, else the job's start while the first epoch's log reaches it.
//
// Pure functions. Thread safety: stateless.
#ifndef FERRY_COORDINATOR_RING_RESUME_H_
#define FERRY_COORDINATOR_RING_RESUME_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "coordinator/membership.h"

namespace ferry {

struct RingResumePoint {
  int64_t version = 0;           // the job's applied steps from then on
  bool from_checkpoint = false;  // false: the initial state (version 0)
};

// `checkpoints`: the complete ring checkpoints, oldest first; `applied`: the
// job's applied steps; `log_from`: the first step of the applied-step log
// (`applied` when it is empty), i.e. the oldest version the accounting can
// go back to. nullopt when there is no such point (the newest checkpoint is
// before this epoch, or there is none after the first epoch).
std::optional<RingResumePoint> RingResumeTarget(
    const std::vector<int64_t>& checkpoints, int64_t applied, int64_t log_from);

// Whether a ring of `members` (rank order) holds none of the job's state
// after `applied` steps: steps were applied and no member took part in one
// (Membership::Member::applied_any).
bool RingLostTheJobState(const std::vector<const Membership::Member*>& members,
                         int64_t applied);

// Whether after `applied` steps some of `ranges` ranges is held by no
// member of `members` (Membership::Member::held_ranges). A ring pipeline's
// ranges are its stages, then the BatchNorm state: every member of the last
// step that trained that stage is gone, and the ring would go on from an
// older copy of it. With sharded optimizer state they are the slices of the
// state, one per member of the ring that applied the last step.
bool RingLostAHeldRange(const std::vector<const Membership::Member*>& members,
                        int ranges, int64_t applied);

}  // namespace ferry

#endif  // FERRY_COORDINATOR_RING_RESUME_H_

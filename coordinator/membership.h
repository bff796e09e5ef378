// Membership: the coordinator's live member set, its generation, the ring
// (join) order, heartbeats and eviction, and the byte counts of members
// that left. It decides nothing about steps or tasks: the Coordinator
// releases a removed member's work.
//
// Generation: starts at 1 and increases by one on every Add and Remove
// (and whenever the coordinator calls NextGeneration, e.g. when it aborts
// steps); it never goes down, also across a restart (LoadFrom).
//
// Ownership: plain value type, owns its members.
// Thread safety: not thread-safe. The Coordinator holds it as a field
// guarded by its mutex (ABSL_GUARDED_BY(mu_)); every call happens under
// that mutex.
#ifndef FERRY_COORDINATOR_MEMBERSHIP_H_
#define FERRY_COORDINATOR_MEMBERSHIP_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "ferry/v1/coordinator.pb.h"
#include "ferry/v1/coordinator_state.pb.h"

namespace ferry {

class Membership {
 public:
  struct Member {
    std::string id;  // "w<join_seq>"
    int64_t join_seq = 0;
    v1::RegisterRequest info;
    absl::Time last_heartbeat;
    int64_t tasks_done = 0;            // async clock
    std::vector<v1::DataTask> leases;  // async: tasks in flight
    v1::ByteCounts bytes;
    v1::ByteCounts peer_bytes;
    absl::Time joined;
    bool applied_any = false;  // a gradient of it was applied
    // Ring pipelines: the flat ranges (indices of StageHoldersOf's lists:
    // the stages, then the BatchNorm state) it held current after the last
    // step it applied, or will after the ring's resume.
    std::vector<int> held_ranges;
    // Hybrid: the steps whose keep_state lease it was given, newest two
    // (a ring member keeps its dense state before each of them).
    std::vector<int64_t> kept_states;
    // It runs the job's evaluations (NextTaskRequest.evaluates).
    bool evaluates = false;
  };

  int64_t generation() const { return generation_; }
  // Bumps the generation (a change the members must notice); returns it.
  int64_t NextGeneration() { return ++generation_; }
  // Members ever added (restored ones included).
  int64_t workers_seen() const { return workers_seen_; }
  int size() const { return static_cast<int>(members_.size()); }

  // Adds a member named "w<n>" (n counts every Add ever made), joined and
  // heard from at `now`; bumps the generation. Never fails (the caller
  // checks limits first).
  Member& Add(const v1::RegisterRequest& info, absl::Time now);
  // Null for an unknown id. The pointer is valid until that member's
  // Remove.
  Member* Find(const std::string& id);
  const Member* Find(const std::string& id) const;
  // Records a heartbeat at `now`. NOT_FOUND for an unknown (or evicted) id.
  absl::Status Heartbeat(const std::string& id, absl::Time now);
  // Members last heard from more than `timeout` before `now`, in id order.
  std::vector<std::string> Expired(absl::Time now,
                                   absl::Duration timeout) const;
  // Removes `id`, keeping its byte counts for the totals, and bumps the
  // generation. False (and nothing changes) for an unknown id.
  bool Remove(const std::string& id);
  // The members in ring (join) order.
  std::vector<const Member*> Ranked() const;

  const std::map<std::string, Member>& members() const { return members_; }
  std::map<std::string, Member>& mutable_members() { return members_; }
  // Cumulative byte counts of members that left, by worker id.
  const std::map<std::string, v1::ByteCounts>& departed_bytes() const {
    return departed_bytes_;
  }
  const std::map<std::string, v1::ByteCounts>& departed_peer_bytes() const {
    return departed_peer_bytes_;
  }

  // Persistence: generation, counters, members (without leases) and the
  // departed counts.
  void SaveTo(v1::CoordinatorState& state) const;
  // Replaces everything with `state`'s; restored members count as heard
  // from at `now` (a heartbeat timeout to come back) and hold no leases.
  void LoadFrom(const v1::CoordinatorState& state, absl::Time now);

 private:
  int64_t generation_ = 1;
  int64_t next_worker_seq_ = 0;
  int64_t workers_seen_ = 0;
  std::map<std::string, Member> members_;
  std::map<std::string, v1::ByteCounts> departed_bytes_;
  std::map<std::string, v1::ByteCounts> departed_peer_bytes_;
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_MEMBERSHIP_H_

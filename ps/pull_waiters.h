// PullWaiters: the pulls a PS shard holds until the version they wait for
// is there (PsShard::WaitForVersion), each a callback.
//
// Contract:
//  - Add() registers a wait and returns its id (ids count up from 1, so
//    never kNoPullWait). The callback it keeps observes ferry_pull_seconds
//    (the time since Add) before a call with a snapshot.
//  - TakeReady(), TakeAll() and ShutDown() move waits out; the caller calls
//    them, outside its lock. PullWaiters itself never calls a callback.
//  - After ShutDown() the waits are shut down for good: shut_down() is true
//    and the shard answers later waits at once.
//
// Not thread-safe: the shard guards it with its mutex.
#ifndef FERRY_PS_PULL_WAITERS_H_
#define FERRY_PS_PULL_WAITERS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "ps/shard_state.h"

namespace ferry {

using PullWaitId = uint64_t;
inline constexpr PullWaitId kNoPullWait = 0;

class PullWaiters {
 public:
  // Called with the snapshot (never null) of the first version >= the one
  // waited for, or with the error that ends the wait.
  using ReadyCallback =
      std::function<void(absl::StatusOr<std::shared_ptr<const PsSnapshot>>)>;
  // Waits taken by TakeReady, each with the snapshot to call it with.
  using ReadyList =
      std::vector<std::pair<ReadyCallback, std::shared_ptr<const PsSnapshot>>>;

  // Registers `ready` for the first version >= `min_version`.
  // RESOURCE_EXHAUSTED (common/peer_limits.h LimitExceeded) when
  // `max_pending` waits are pending; `ready` is dropped uncalled then.
  absl::StatusOr<PullWaitId> Add(int64_t min_version, ReadyCallback ready,
                                 int64_t max_pending);
  // Forgets a wait; true when it was pending.
  bool Cancel(PullWaitId id);

  // Moves every wait for a version <= `version` into `ready`, each paired
  // with `snapshot`.
  void TakeReady(int64_t version,
                 const std::shared_ptr<const PsSnapshot>& snapshot,
                 ReadyList& ready);
  // Moves every wait into `taken`.
  void TakeAll(std::vector<ReadyCallback>& taken);
  // The same, and shut_down() is true from now on.
  void ShutDown(std::vector<ReadyCallback>& taken);
  bool shut_down() const { return shut_down_; }

  int64_t size() const { return static_cast<int64_t>(waiters_.size()); }

 private:
  struct Waiter {
    int64_t min_version = 0;
    ReadyCallback ready;
  };
  absl::flat_hash_map<PullWaitId, Waiter> waiters_;
  PullWaitId next_id_ = 1;
  bool shut_down_ = false;
};

}  // namespace ferry

#endif  // FERRY_PS_PULL_WAITERS_H_

// A PS shard's counters for PsShardInfo: PushCounters (pushes accepted and
// rejected, async staleness, steps finalized on push), guarded by the
// shard's mutex, and PeerBytes (bytes exchanged by peer role), which has
// its own lock so that recording bytes never waits for an update.
#ifndef FERRY_PS_SHARD_COUNTERS_H_
#define FERRY_PS_SHARD_COUNTERS_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace ferry {

struct PushCounts {
  int64_t accepted = 0;
  int64_t rejected = 0;
  int64_t max_staleness = 0;      // async only
  int64_t sum_staleness = 0;      // async only
  int64_t finalized_on_push = 0;  // sync: steps applied without FinalizeStep
};

// Counts only; the shard decides what is counted. Not thread-safe.
class PushCounters {
 public:
  void CountAccepted() { ++counts_.accepted; }
  void CountRejected() { ++counts_.rejected; }
  void CountFinalizedOnPush() { ++counts_.finalized_on_push; }
  // An async push applied `steps` versions after its base version: adds it
  // to the max and the sum, and sets ferry_staleness_steps and observes
  // ferry_push_staleness_steps.
  void RecordStaleness(int64_t steps);

  const PushCounts& counts() const { return counts_; }

 private:
  PushCounts counts_;
};

// Bytes sent and received by peer role ("worker", "coordinator"); roles
// with no bytes in a direction are absent from that direction's map.
// Thread-safe.
class PeerBytes {
 public:
  void Add(absl::string_view role, int64_t sent, int64_t received)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Both maps, read together.
  void CopyTo(std::map<std::string, int64_t>& sent,
              std::map<std::string, int64_t>& received) const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, int64_t> sent_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> received_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_PS_SHARD_COUNTERS_H_

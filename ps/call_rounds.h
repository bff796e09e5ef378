// Rounds of parallel calls, one per PS shard: a countdown of the calls in
// flight, waiting for all of them (cancelling the rest after a fatal
// failure), and retrying the shards that were UNAVAILABLE.
#ifndef FERRY_PS_CALL_ROUNDS_H_
#define FERRY_PS_CALL_ROUNDS_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/backoff.h"

namespace ferry {

// Counts the calls of one round down to zero. A call's last action is Done().
class CallGroup {
 public:
  explicit CallGroup(int calls) : pending_(calls) {}

  void Done(bool fatal) {
    absl::MutexLock lock(&mu_);
    --pending_;
    fatal_ = fatal_ || fatal;
  }
  // Waits until every call is done or one failed fatally; returns whether one
  // failed fatally.
  bool WaitAllOrFatal() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &CallGroup::AllDoneOrFatal));
    return fatal_;
  }
  void WaitAll() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &CallGroup::AllDone));
  }

 private:
  absl::Mutex mu_;
  int pending_ ABSL_GUARDED_BY(mu_);
  bool fatal_ ABSL_GUARDED_BY(mu_) = false;

  bool AllDone() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return pending_ == 0;
  }
  bool AllDoneOrFatal() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return pending_ == 0 || fatal_;
  }
};

// Waits for every call of `group` (cancelling all once one failed fatally)
// and returns their statuses in order. Call needs Cancel() and status().
template <typename Call>
std::vector<absl::Status> WaitCalls(
    CallGroup& group, const std::vector<std::unique_ptr<Call>>& calls) {
  if (group.WaitAllOrFatal()) {
    for (const auto& call : calls) call->Cancel();
    group.WaitAll();
  }
  std::vector<absl::Status> statuses;
  for (const auto& call : calls) statuses.push_back(call->status());
  return statuses;
}

// Runs `run_round(shards, round)` (one status per shard) first for every
// shard, then again for the shards that failed with UNAVAILABLE, with
// exponential backoff, until all succeed, one fails otherwise, or the retry
// budget is spent. Returns the most telling error.
absl::Status RetryRounds(int num_shards, const RetryPolicy& retry,
                         const std::function<std::vector<absl::Status>(
                             const std::vector<int>&, int)>& run_round);

}  // namespace ferry

#endif  // FERRY_PS_CALL_ROUNDS_H_

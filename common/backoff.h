// Retrying with exponential backoff and jitter: the one implementation every
// retry loop in ferry uses (PS calls, coordinator calls, ring recovery,
// fetching the job at start).
#ifndef FERRY_COMMON_BACKOFF_H_
#define FERRY_COMMON_BACKOFF_H_

#include <cstdint>

#include "absl/time/time.h"
#include "common/clock.h"

namespace ferry {

// How to retry: waits start at `initial_backoff` and double up to
// `max_backoff`; once `budget` has elapsed since the first attempt the caller
// gives up (budget == 0: never retry; absl::InfiniteDuration(): never give
// up). Each wait is drawn uniformly from [(1 - jitter) * d, d], so peers that
// failed together do not retry in lockstep; jitter in [0, 1].
struct RetryPolicy {
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(1);
  absl::Duration budget = absl::Seconds(30);
  double jitter = 0.5;
};

// The wait before retry number `retry` (0 = the first retry) of `policy`,
// before jitter: initial_backoff * 2^retry, capped at max_backoff.
absl::Duration BackoffCeiling(const RetryPolicy& policy, int retry);

// The jittered wait: `unit` in [0, 1) picks a point of
// [(1 - jitter) * ceiling, ceiling]. Pure.
absl::Duration JitteredBackoff(const RetryPolicy& policy, int retry,
                               double unit);

// One retry loop's state. Typical use:
//
//   Backoff backoff(policy);
//   while (true) {
//     absl::Status s = Attempt();
//     if (s.ok() || !Retryable(s) || !backoff.Wait()) return s;
//   }
//
// Thread safety: one loop, one thread. The clock is not owned and must
// outlive the Backoff.
class Backoff {
 public:
  explicit Backoff(const RetryPolicy& policy, Clock* clock = RealClock());

  // Sleeps the next wait and returns true; or returns false at once when that
  // wait would end after the budget (the caller gives up with its last error),
  // and from then on until Reset(): a shorter jittered draw on a later call
  // does not revive a budget already given up.
  bool Wait();

  // Starts over (after a success): the next wait is initial_backoff again and
  // the budget is counted from now.
  void Reset();

  // Retries made so far (successful Wait() calls since the last Reset()).
  int retries() const { return retries_; }
  // When the budget runs out (InfiniteFuture for an infinite budget).
  absl::Time give_up() const { return give_up_; }

 private:
  RetryPolicy policy_;
  Clock* clock_;
  absl::Time give_up_;
  int retries_ = 0;
  bool exhausted_ = false;
};

}  // namespace ferry

#endif  // FERRY_COMMON_BACKOFF_H_

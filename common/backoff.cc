#include "common/backoff.h"

#include <algorithm>

#include "absl/random/random.h"

namespace ferry {

Clock* RealClock() {
  class Real : public Clock {
   public:
    absl::Time Now() const override { return absl::Now(); }
    void SleepFor(absl::Duration d) override { absl::SleepFor(d); }
  };
  static Real* const clock = new Real();
  return clock;
}

absl::Duration BackoffCeiling(const RetryPolicy& policy, int retry) {
  absl::Duration d = std::max(policy.initial_backoff, absl::ZeroDuration());
  const absl::Duration cap = std::max(policy.max_backoff, d);
  for (int i = 0; i < retry && d < cap; ++i) d *= 2;
  return std::min(d, cap);
}

absl::Duration JitteredBackoff(const RetryPolicy& policy, int retry,
                               double unit) {
  const double jitter = std::clamp(policy.jitter, 0.0, 1.0);
  const double u = std::clamp(unit, 0.0, 1.0);
  return BackoffCeiling(policy, retry) * (1.0 - jitter * (1.0 - u));
}

namespace {

absl::Time GiveUpAt(const RetryPolicy& policy, absl::Time now) {
  if (policy.budget == absl::InfiniteDuration()) return absl::InfiniteFuture();
  return now + std::max(policy.budget, absl::ZeroDuration());
}

}  // namespace

Backoff::Backoff(const RetryPolicy& policy, Clock* clock)
    : policy_(policy),
      clock_(clock),
      give_up_(GiveUpAt(policy, clock->Now())) {}

bool Backoff::Wait() {
  if (policy_.budget <= absl::ZeroDuration() || exhausted_) return false;
  thread_local absl::BitGen rng;
  const absl::Duration wait =
      JitteredBackoff(policy_, retries_, absl::Uniform(rng, 0.0, 1.0));
  if (clock_->Now() + wait > give_up_) {
    exhausted_ = true;
    return false;
  }
  clock_->SleepFor(wait);
  ++retries_;
  return true;
}

void Backoff::Reset() {
  retries_ = 0;
  exhausted_ = false;
  give_up_ = GiveUpAt(policy_, clock_->Now());
}

}  // namespace ferry

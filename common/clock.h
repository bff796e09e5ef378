// Time as a seam: the real clock, and a fake one that tests advance by hand so
// that code with timeouts, leases and backoff is tested without sleeping.
#ifndef FERRY_COMMON_CLOCK_H_
#define FERRY_COMMON_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ferry {

// Thread-safe. Implementations must never go backwards.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  // Blocks the caller for `d` of this clock's time (returns at once for d <=
  // 0).
  virtual void SleepFor(absl::Duration d) = 0;
};

// The process's wall clock (absl::Now, absl::SleepFor). Never null; not owned.
Clock* RealClock();

// A clock that moves only when told. SleepFor(d) advances it by d and returns
// at once, so a retry loop under a FakeClock runs its whole schedule
// instantly; Sleeps() records every SleepFor for tests to inspect.
class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::UnixEpoch() + absl::Hours(24))
      : now_(start) {}

  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void SleepFor(absl::Duration d) override {
    absl::MutexLock lock(&mu_);
    if (d > absl::ZeroDuration()) now_ += d;
    sleeps_ += 1;
    slept_ += d > absl::ZeroDuration() ? d : absl::ZeroDuration();
  }
  // REQUIRES: d >= 0.
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  int sleeps() const {
    absl::MutexLock lock(&mu_);
    return sleeps_;
  }
  absl::Duration slept() const {
    absl::MutexLock lock(&mu_);
    return slept_;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
  int sleeps_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration slept_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_COMMON_CLOCK_H_

// ThreadSanitizer build only (FERRY_SANITIZE=thread): makes absl::Mutex and
// absl::CondVar visible to TSan.
//
// Debian's Abseil is not built with TSan, so its Mutex (futexes and atomics
// in uninstrumented code) creates no happens-before edges that TSan can see,
// and every field guarded by an absl::Mutex would be reported as a race.
// This file defines the Mutex / CondVar entry points in the executable; the
// dynamic linker binds every caller (ferry's code, libgrpc, libabsl itself)
// to them. Each calls Abseil's own implementation (dlsym RTLD_NEXT) and adds
// __tsan_acquire after the mutex is taken and __tsan_release before it is
// let go (both, around a wait that gives it up). A Condition is evaluated
// inside Abseil while the mutex is held (by the waiter before its LockWhen
// returns, or by whichever thread is unlocking), so the shim passes Abseil a
// wrapper Condition that does __tsan_acquire before calling the caller's and
// __tsan_release after it.
// That is exactly the ordering a mutex guarantees, so no real race is
// hidden; lock-order (deadlock) checks are not made for these mutexes.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace {

#define FERRY_STR2(x) #x
#define FERRY_STR(x) FERRY_STR2(x)

// "_ZN4absl" <len><inline namespace> <class and method mangling>.
std::string Mangled(const char* rest) {
  const std::string ns = FERRY_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  return "_ZN4absl" + std::to_string(ns.size()) + ns + rest;
}

template <typename Fn>
Fn Real(const char* rest) {
  const std::string name = Mangled(rest);
  void* fn = dlsym(RTLD_NEXT, name.c_str());
  if (fn == nullptr) {
    std::fprintf(stderr, "absl_mutex_tsan_shim: %s not found\n", name.c_str());
    std::abort();
  }
  return reinterpret_cast<Fn>(fn);
}

void Acquired(const void* mu) { __tsan_acquire(const_cast<void*>(mu)); }
void Releasing(const void* mu) { __tsan_release(const_cast<void*>(mu)); }

// `cond` of a wait on `mu`, as Abseil evaluates it: with `mu` held.
struct HeldCondition {
  const absl::Condition* cond;
  const absl::Mutex* mu;

  // Abseil evaluates with the mutex held and lets it go afterwards (or
  // returns it to the caller, whose Unlock releases it again), so what the
  // condition read is ordered before the next holder: release after too.
  static bool Eval(void* arg) {
    const auto* held = static_cast<const HeldCondition*>(arg);
    Acquired(held->mu);
    const bool result = held->cond->Eval();
    Releasing(held->mu);
    return result;
  }
};

// Declares `wrapped`, a Condition that evaluates `cond` as held on `mu`.
#define FERRY_HELD(mu, cond)                   \
  HeldCondition held_condition{&(cond), (mu)}; \
  const absl::Condition wrapped(&HeldCondition::Eval, &held_condition)

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  static auto real = Real<void (*)(Mutex*)>("5Mutex4LockEv");
  real(this);
  Acquired(this);
}
void Mutex::ReaderLock() {
  static auto real = Real<void (*)(Mutex*)>("5Mutex10ReaderLockEv");
  real(this);
  Acquired(this);
}
bool Mutex::TryLock() {
  static auto real = Real<bool (*)(Mutex*)>("5Mutex7TryLockEv");
  const bool locked = real(this);
  if (locked) Acquired(this);
  return locked;
}
bool Mutex::ReaderTryLock() {
  static auto real = Real<bool (*)(Mutex*)>("5Mutex13ReaderTryLockEv");
  const bool locked = real(this);
  if (locked) Acquired(this);
  return locked;
}
void Mutex::Unlock() {
  static auto real = Real<void (*)(Mutex*)>("5Mutex6UnlockEv");
  Releasing(this);
  real(this);
}
void Mutex::ReaderUnlock() {
  static auto real = Real<void (*)(Mutex*)>("5Mutex12ReaderUnlockEv");
  Releasing(this);
  real(this);
}

void Mutex::LockWhen(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>(
      "5Mutex8LockWhenERKNS0_9ConditionE");
  FERRY_HELD(this, cond);
  real(this, wrapped);
  Acquired(this);
}
void Mutex::ReaderLockWhen(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>(
      "5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  FERRY_HELD(this, cond);
  real(this, wrapped);
  Acquired(this);
}
bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Duration)>(
      "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  FERRY_HELD(this, cond);
  const bool met = real(this, wrapped, timeout);
  Acquired(this);
  return met;
}
bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  FERRY_HELD(this, cond);
  const bool met = real(this, wrapped, deadline);
  Acquired(this);
  return met;
}
bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Duration)>(
      "5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  FERRY_HELD(this, cond);
  const bool met = real(this, wrapped, timeout);
  Acquired(this);
  return met;
}
bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, Time deadline) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  FERRY_HELD(this, cond);
  const bool met = real(this, wrapped, deadline);
  Acquired(this);
  return met;
}

void Mutex::Await(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>(
      "5Mutex5AwaitERKNS0_9ConditionE");
  FERRY_HELD(this, cond);
  Releasing(this);
  real(this, wrapped);
  Acquired(this);
}
bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Duration)>(
      "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  FERRY_HELD(this, cond);
  Releasing(this);
  const bool met = real(this, wrapped, timeout);
  Acquired(this);
  return met;
}
bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  FERRY_HELD(this, cond);
  Releasing(this);
  const bool met = real(this, wrapped, deadline);
  Acquired(this);
  return met;
}

void CondVar::Wait(Mutex* mu) {
  static auto real =
      Real<void (*)(CondVar*, Mutex*)>("7CondVar4WaitEPNS0_5MutexE");
  Releasing(mu);
  real(this, mu);
  Acquired(mu);
}
bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  static auto real = Real<bool (*)(CondVar*, Mutex*, Duration)>(
      "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  Releasing(mu);
  const bool timed_out = real(this, mu, timeout);
  Acquired(mu);
  return timed_out;
}
bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  static auto real = Real<bool (*)(CondVar*, Mutex*, Time)>(
      "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  Releasing(mu);
  const bool timed_out = real(this, mu, deadline);
  Acquired(mu);
  return timed_out;
}

ABSL_NAMESPACE_END
}  // namespace absl

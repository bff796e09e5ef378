// absl::Mutex's deadlock detection in ferry's processes.
//
// Debian's Abseil is built with it on, set to abort: every Lock records the
// order of the mutexes held in one global graph (under a global lock), and
// a lock order that could deadlock kills the process. That costs every lock
// of ferry and gRPC (~2 % of a PS job's CPU in `perf`) and turns a lock
// order nobody has hit yet into a crash. Tests want it; a trainer does not.
//
// Thread safety: call first thing in main(), before any thread starts.
#ifndef FERRY_COMMON_MUTEX_CHECKS_H_
#define FERRY_COMMON_MUTEX_CHECKS_H_

namespace ferry {

// The environment variable that turns the detection on, aborting on a
// potential deadlock (any value but "0"): the test suites set it for the
// processes they start.
inline constexpr char kMutexDeadlockChecksEnv[] = "FERRY_MUTEX_DEADLOCK_CHECKS";

// Turns the detection off, or on (abort) when kMutexDeadlockChecksEnv asks.
void ConfigureMutexDeadlockChecks();

}  // namespace ferry

#endif  // FERRY_COMMON_MUTEX_CHECKS_H_

// ConfigureMutexDeadlockChecks (common/mutex_checks.h): each case runs in a
// child process (gtest's death tests), since the mode is process-wide.
#include "common/mutex_checks.h"

#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

// Locks two mutexes in one order, then in the other: a potential deadlock.
void InvertLockOrder() {
  absl::Mutex a, b;
  a.Lock();
  b.Lock();
  b.Unlock();
  a.Unlock();
  b.Lock();
  a.Lock();
  a.Unlock();
  b.Unlock();
}

TEST(MutexDeadlockChecks, OffUnlessTheEnvironmentAsks) {
  EXPECT_EXIT(
      {
        unsetenv(kMutexDeadlockChecksEnv);
        ConfigureMutexDeadlockChecks();
        InvertLockOrder();
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        setenv(kMutexDeadlockChecksEnv, "0", 1);
        ConfigureMutexDeadlockChecks();
        InvertLockOrder();
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(MutexDeadlockChecks, KeptWhenTheEnvironmentAsks) {
  EXPECT_DEATH(
      {
        setenv(kMutexDeadlockChecksEnv, "1", 1);
        ConfigureMutexDeadlockChecks();
        InvertLockOrder();
      },
      "deadlock");
}

}  // namespace
}  // namespace ferry

#include "common/mutex_checks.h"

#include <cstdlib>
#include <cstring>

#include "absl/synchronization/mutex.h"

namespace ferry {

void ConfigureMutexDeadlockChecks() {
  const char* keep = std::getenv(kMutexDeadlockChecksEnv);
  absl::SetMutexDeadlockDetectionMode(keep != nullptr &&
                                              std::strcmp(keep, "0") != 0
                                          ? absl::OnDeadlockCycle::kAbort
                                          : absl::OnDeadlockCycle::kIgnore);
}

}  // namespace ferry

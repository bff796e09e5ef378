// Process exit codes shared by ferry-server, ferry-worker and the launchers
// that supervise them (ferry local, Kubernetes).
#ifndef FERRY_COMMON_EXIT_CODES_H_
#define FERRY_COMMON_EXIT_CODES_H_

#include "absl/status/status.h"

namespace ferry {

// A fault at run time (a peer lost, a file not writable): starting the
// process again may help, and supervisors restart servers that exit so.
inline constexpr int kExitFailure = 1;

// The configuration is invalid (bad flags, a model that does not fit the
// dataset, a missing dataset): starting again with the same flags fails the
// same way, so supervisors report it at once and never restart.
inline constexpr int kExitConfig = 2;

// The exit code for a process that could not start because of `status`:
// kExitConfig for INVALID_ARGUMENT, kExitFailure otherwise.
inline int StartupExitCode(const absl::Status& status) {
  return absl::IsInvalidArgument(status) ? kExitConfig : kExitFailure;
}

}  // namespace ferry

#endif  // FERRY_COMMON_EXIT_CODES_H_

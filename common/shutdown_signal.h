// SIGINT/SIGTERM handling for servers and workers without async-signal
// hazards: BlockShutdownSignals() must run in main() before any thread is
// started (threads inherit the mask); WaitForShutdownSignal() then receives
// them synchronously.
#ifndef FERRY_COMMON_SHUTDOWN_SIGNAL_H_
#define FERRY_COMMON_SHUTDOWN_SIGNAL_H_

#include "absl/time/time.h"

namespace ferry {

void BlockShutdownSignals();
// Returns the signal number, or 0 when `timeout` passed without one.
int WaitForShutdownSignal(absl::Duration timeout);

}  // namespace ferry

#endif  // FERRY_COMMON_SHUTDOWN_SIGNAL_H_

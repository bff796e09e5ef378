// SIGINT/SIGTERM handling for servers and the `ferry` client without
// async-signal hazards: BlockShutdownSignals() runs first in main(), so
// every thread the program starts inherits the mask, and
// WaitForShutdownSignal() receives the signals synchronously.
//
// Threads that libraries start before main() (OpenBLAS starts its pool from
// a constructor) do not block them, and the kernel may deliver a signal to
// such a thread whenever no thread is waiting for it. Left at the default
// action, that killed the process (exit 143) instead of shutting it down:
// shards and coordinators stopped by `ferry local` without their last
// checkpoint. So BlockShutdownSignals() also installs a handler that only
// records the signal, and WaitForShutdownSignal() returns a recorded one
// too (within 50 ms).
#ifndef FERRY_COMMON_SHUTDOWN_SIGNAL_H_
#define FERRY_COMMON_SHUTDOWN_SIGNAL_H_

#include "absl/time/time.h"

namespace ferry {

void BlockShutdownSignals();
// Returns the signal number, or 0 when `timeout` passed without one. Each
// signal is returned once.
int WaitForShutdownSignal(absl::Duration timeout);

}  // namespace ferry

#endif  // FERRY_COMMON_SHUTDOWN_SIGNAL_H_

#include "common/shutdown_signal.h"

#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <ctime>

namespace ferry {
namespace {
sigset_t ShutdownSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}
}  // namespace

void BlockShutdownSignals() {
  sigset_t set = ShutdownSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int WaitForShutdownSignal(absl::Duration timeout) {
  sigset_t set = ShutdownSet();
  const timespec ts = absl::ToTimespec(timeout);
  const int sig = sigtimedwait(&set, nullptr, &ts);
  return sig > 0 ? sig : 0;
}

}  // namespace ferry

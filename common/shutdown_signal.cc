#include "common/shutdown_signal.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <ctime>

#include "absl/time/clock.h"

namespace ferry {
namespace {

// A shutdown signal delivered to a thread that does not block it (0: none).
std::atomic<int> g_recorded{0};
static_assert(std::atomic<int>::is_always_lock_free,
              "recorded from a signal handler");

extern "C" void RecordShutdownSignal(int sig) { g_recorded.store(sig); }

sigset_t ShutdownSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// How long one sigtimedwait may wait before the recorded signal is looked
// at again.
constexpr absl::Duration kRecordedPoll = absl::Milliseconds(50);

}  // namespace

void BlockShutdownSignals() {
  sigset_t set = ShutdownSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  struct sigaction action = {};
  action.sa_handler = RecordShutdownSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int WaitForShutdownSignal(absl::Duration timeout) {
  const sigset_t set = ShutdownSet();
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (const int recorded = g_recorded.exchange(0); recorded != 0) {
      return recorded;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return 0;
    const timespec ts = absl::ToTimespec(std::min(left, kRecordedPoll));
    const int sig = sigtimedwait(&set, nullptr, &ts);
    if (sig > 0) return sig;
  }
}

}  // namespace ferry

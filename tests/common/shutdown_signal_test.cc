// A SIGTERM that the kernel hands to a thread not blocking it (as OpenBLAS's
// pool threads, started before main) is still received by
// WaitForShutdownSignal instead of killing the process.
#include "common/shutdown_signal.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

TEST(ShutdownSignalTest, ASignalToAThreadThatDoesNotBlockItIsReceived) {
  BlockShutdownSignals();
  absl::Notification unblocked;
  absl::Notification done;
  std::thread library_thread([&] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    unblocked.Notify();
    done.WaitForNotification();
  });
  unblocked.WaitForNotification();
  // library_thread (and threads earlier tests started) do not block
  // SIGTERM: without the recording handler, the default action would end
  // this test binary.
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);
  EXPECT_EQ(WaitForShutdownSignal(absl::Seconds(10)), SIGTERM);
  EXPECT_EQ(WaitForShutdownSignal(absl::Milliseconds(1)), 0);  // once
  done.Notify();
  library_thread.join();

  // Sent while the caller waits: received by sigtimedwait as before.
  ASSERT_EQ(kill(getpid(), SIGINT), 0);
  EXPECT_EQ(WaitForShutdownSignal(absl::Seconds(10)), SIGINT);
}

}  // namespace
}  // namespace ferry

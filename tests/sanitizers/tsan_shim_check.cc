// Checks that the TSan build sees absl::Mutex (absl_mutex_tsan_shim.cc)
// without hiding races. Two threads write one counter:
//   same       both under one absl::Mutex, one of them through
//              LockWhen(Condition) : TSan must stay silent (exit 0);
//   different  each under its own absl::Mutex: a real race, which TSan must
//              report (ctest expects the run to fail).
#include <cstdio>
#include <cstring>
#include <thread>

#include "absl/synchronization/mutex.h"

namespace {

int counter = 0;  // the shared state; guarded by whichever mutex the mode uses
absl::Mutex first;
absl::Mutex second;

void Bump(absl::Mutex* mu, int times) {
  for (int i = 0; i < times; ++i) {
    absl::MutexLock lock(mu);
    ++counter;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool same = argc == 2 && std::strcmp(argv[1], "same") == 0;
  const bool different = argc == 2 && std::strcmp(argv[1], "different") == 0;
  if (!same && !different) {
    std::fprintf(stderr, "usage: %s same|different\n", argv[0]);
    return 2;
  }
  std::thread other([&] { Bump(same ? &first : &second, 1000); });
  Bump(&first, 1000);
  if (same) {  // waits with a Condition that reads the counter
    first.LockWhen(absl::Condition(
        +[](int* c) { return *c == 2000; }, &counter));
    first.Unlock();
  }
  other.join();
  std::printf("counter %d\n", counter);
  return 0;
}

// Compiled, never run, by ctest thread_safety_annotations_bite: a guarded
// field read without its lock must fail a clang build of ferry (the flags
// of FERRY_THREAD_SAFETY_FLAGS in the top CMakeLists.txt).
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

class Counter {
 public:
  int ReadLocked() const {
    absl::MutexLock lock(&mu_);
    return value_;
  }
  int ReadUnlocked() const { return value_; }  // wrong on purpose

 private:
  mutable absl::Mutex mu_;
  int value_ ABSL_GUARDED_BY(mu_) = 0;
};

int main() {
  Counter c;
  return c.ReadLocked() + c.ReadUnlocked();
}

#include "common/allocator_tuning.h"

#include <unistd.h>

#include <cstdlib>

namespace ferry {

void TuneAllocatorForLargeMessages(char** argv) {
#if defined(__GLIBC__)
  if (std::getenv("GLIBC_TUNABLES") != nullptr ||
      std::getenv("FERRY_NO_MALLOC_TUNING") != nullptr) {
    return;
  }
  if (setenv("GLIBC_TUNABLES", kFerryMallocTunables, 1) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("GLIBC_TUNABLES");  // exec failed: run untuned
#else
  (void)argv;
#endif
}

}  // namespace ferry

#include "common/allocator_tuning.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace ferry {

void TuneAllocatorForLargeMessages() {
#if defined(__GLIBC__)
  // 32 MiB is glibc's largest mmap threshold on 64-bit: allocations below it
  // come from the heap (reused), not from fresh mmaps.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  // Keep up to 1 GiB of free heap instead of handing it back after each step.
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 64 << 20);
#endif
}

}  // namespace ferry

// glibc malloc settings for processes that move tensors through gRPC.
//
// By default glibc serves every allocation above 128 KiB-32 MiB (a sliding
// threshold) with a fresh mmap and returns freed heap tops to the kernel, so
// each 1 MiB message buffer is new memory that page-faults on first touch: in
// the ring all-reduce benchmark page-fault handling was a third of all CPU.
// Keeping such buffers on the heap and not trimming it makes them reused.
#ifndef FERRY_COMMON_ALLOCATOR_TUNING_H_
#define FERRY_COMMON_ALLOCATOR_TUNING_H_

namespace ferry {

// Call once at the start of main(). No-op where mallopt is unavailable.
void TuneAllocatorForLargeMessages();

}  // namespace ferry

#endif  // FERRY_COMMON_ALLOCATOR_TUNING_H_

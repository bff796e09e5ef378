// glibc malloc settings for processes that move tensors through gRPC.
//
// By default glibc serves large allocations with fresh mmaps, trims freed
// heap tops and gives every thread its own arena whose heap shrinks and
// regrows: every 1 MiB message buffer is then new memory that page-faults
// on first touch. In the ring all-reduce benchmark (64 MiB, 2 ranks) page
// faults were a third of all CPU; with the settings below they fall ~5x and
// busbw rises ~1.5x. mallopt() after start did not give the same effect (the
// per-thread arenas), so the settings go in through GLIBC_TUNABLES, which
// glibc reads only at program start.
#ifndef FERRY_COMMON_ALLOCATOR_TUNING_H_
#define FERRY_COMMON_ALLOCATOR_TUNING_H_

namespace ferry {

// The GLIBC_TUNABLES value ferry runs with.
inline constexpr char kFerryMallocTunables[] =
    "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold="
    "1073741824:"
    "glibc.malloc.arena_max=1";

// The GLIBC_TUNABLES a PyTorch worker runs with (ferry local's
// --worker-command, the ferry:torch image): one malloc arena, so that the
// freed buffers of gRPC's threads and of torch's activations are reused
// instead of spread over an arena per thread. ResNet-18, 2 ring workers,
// 3 alternating rounds (2026-12-03): peak 727-770 MiB per worker against
// 794-824 MiB with glibc's defaults, 56.6 against 54.8 samples/s (medians).
// kFerryMallocTunables' untrimmed heap keeps every freed activation buffer
// of a torch process instead (746-791 MiB).
inline constexpr char kTorchWorkerMallocTunables[] = "glibc.malloc.arena_max=1";

// Call first thing in main(). When GLIBC_TUNABLES is unset (and
// FERRY_NO_MALLOC_TUNING is unset) it sets it to kFerryMallocTunables and
// re-executes the program with the same arguments (same pid); children
// inherit the setting. Returns when no re-exec was needed or it failed.
void TuneAllocatorForLargeMessages(char** argv);

}  // namespace ferry

#endif  // FERRY_COMMON_ALLOCATOR_TUNING_H_

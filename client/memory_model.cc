#include "client/memory_model.h"

#include <algorithm>

#include "common/ring_defaults.h"

namespace ferry {
namespace {

constexpr int64_t kFloatBytes = 4;

// The largest of `parts` near-equal slices of `total` (common/sharding.h's
// ShardRange rounding).
int64_t LargestSlice(int64_t total, int parts) {
  return (total + parts - 1) / parts;
}

}  // namespace

MemoryPrediction PredictMemory(const MemoryInput& in) {
  const int64_t n = in.params;
  const int64_t k = in.optimizer_state_buffers;
  MemoryPrediction p;
  p.ps_worker = 2 * n * kFloatBytes;
  const int64_t shard_slice = LargestSlice(n, in.shards);
  const int64_t staged = in.sum_on_arrival ? 1 : in.workers;
  p.ps_shard = shard_slice * (1 + k + staged) * kFloatBytes;
  p.ring_member = (2 + k + (1 + k)) * n * kFloatBytes;
  // Slices differ by one element at most: the larger of both members.
  for (const int64_t slice : {n / in.workers, LargestSlice(n, in.workers)}) {
    const int64_t copy = (1 + k) * slice;
    const bool copy_in_grads = in.grads_idle_between_steps &&
                               copy <= n - slice &&
                               copy * kFloatBytes >= kRingPromptCommitMinBytes;
    p.sharded_ring_member = std::max(
        p.sharded_ring_member,
        (2 * n + k * slice + (copy_in_grads ? 0 : copy)) * kFloatBytes);
  }
  return p;
}

}  // namespace ferry

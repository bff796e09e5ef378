// Memory per process of a synchronous job: the training state each role
// holds for a model of `params` fp32 parameters (parameters, gradients,
// optimizer state, staging and rollback copies), not the process's own
// fixed cost (libraries, thread stacks), its receive buffers nor its
// dataset. Measured with 4 MiB receive windows (--receive-window): 46 MiB
// above the state for a ring member on synthetic data, 37 MiB for a shard;
// gRPC's adaptive windows add 90-130 MiB to a shard (docs/benchmarks.md);
// a worker adds its training set (Fashion-MNIST: 188 MB).
//
// Pure functions, no IO. The terms follow what the code allocates:
// - PS worker: params + gradients (pulls land in params).
// - PS shard: its slice, the optimizer state of the slice, and one staged
//   slice per pushing worker (one sum with --sum-on-arrival).
// - ring member: params + gradients + optimizer state + one rollback copy
//   of params and optimizer state (worker/ring_state_copies.h).
// - ring member with sharded optimizer state (ZeRO stage 1): params +
//   gradients + the state of its 1/W slice + a rollback copy of its slice
//   of params and state, unless that copy lies in the gradient buffer
//   outside the slice (a ferry-worker's copy of at least
//   kRingPromptCommitMinBytes that fits there; a slice size whose copy
//   does not can make a smaller slice's member the largest).
#ifndef FERRY_CLIENT_MEMORY_MODEL_H_
#define FERRY_CLIENT_MEMORY_MODEL_H_

#include <cstdint>

namespace ferry {

struct MemoryInput {
  int64_t params = 0;
  int optimizer_state_buffers = 1;  // 0 SGD, 1 momentum, 2 Adam/AdamW
  int workers = 1;
  int shards = 1;
  bool sum_on_arrival = false;
  // The workers leave their gradients alone between steps (ferry-worker;
  // not PyTorch workers, whose .grad are views of the buffer): a sharded
  // ring member's rollback copy may lie in its gradient buffer.
  bool grads_idle_between_steps = true;
};

// Bytes per process of each role; the largest when slices are uneven.
struct MemoryPrediction {
  int64_t ps_worker = 0;
  int64_t ps_shard = 0;
  int64_t ring_member = 0;
  int64_t sharded_ring_member = 0;
};

// REQUIRES: params >= 0, workers >= 1, shards >= 1, buffers >= 0.
MemoryPrediction PredictMemory(const MemoryInput& input);

}  // namespace ferry

#endif  // FERRY_CLIENT_MEMORY_MODEL_H_

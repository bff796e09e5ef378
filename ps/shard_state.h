// What a PS shard's state is made of, for checkpoints and pulls: one
// version of the dense slice (PsSnapshot), the whole state as host copies
// (PsShardState) and the same read in place (PsShardStateView).
#ifndef FERRY_PS_SHARD_STATE_H_
#define FERRY_PS_SHARD_STATE_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "ps/sparse_store.h"

namespace ferry {

// One version of the slice, immutable once shared with a reader.
struct PsSnapshot {
  int64_t version = 0;
  std::vector<float> values;  // the whole slice, index 0 = range().begin
};

// The state read in place, for a checkpoint written without a copy
// (PsShard::VisitState): valid only during the visit.
struct PsShardStateView {
  int64_t version = 0;
  int64_t optimizer_steps = 0;
  absl::Span<const float> params;  // the shard's slice, in place
  // The optimizer state, each the dense slice's size: in place on a
  // host-memory backend, else host copies held by `host_copies`.
  std::vector<absl::Span<const float>> optimizer_state;
  std::vector<std::vector<float>> host_copies;
  // Jobs with embedding tables: the live store (its CheckpointSources read
  // the rows in place); null otherwise.
  const SparseStore* sparse = nullptr;
};

// Everything a checkpoint holds of a shard (host copies).
struct PsShardState {
  int64_t version = 0;
  int64_t optimizer_steps = 0;  // Optimizer::steps_applied()
  std::vector<float> params;    // the slice
  std::vector<std::vector<float>> optimizer_state;  // each the slice's size
  // Jobs with embedding tables: every table's rows held here (one part per
  // table, SparseStore::Export).
  std::vector<TableCheckpoint> tables;
};

}  // namespace ferry

#endif  // FERRY_PS_SHARD_STATE_H_

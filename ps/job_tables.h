// The embedding tables a DLRM job's JobSpec describes, as the SparseStore
// of one shard of them (ps/sparse_store.h): what a PS shard, a ring member
// (all of them: shard 0 of 1), the ring's evaluation, the single process
// and the coordinator's check of --init-from build.
//
// Thread safety: pure functions.
#ifndef FERRY_PS_JOB_TABLES_H_
#define FERRY_PS_JOB_TABLES_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "ferry/v1/common.pb.h"
#include "model/dlrm_spec.h"
#include "model/embedding_options.h"
#include "ps/sparse_store.h"

namespace ferry {

// The tables of DLRM `spec` (one per field, of its embedding dimension)
// under `embedding` and `seed`, as shard `shard_id` of `num_shards`.
SparseStoreConfig DlrmTablesConfig(const DlrmSpec& spec,
                                   const EmbeddingOptions& embedding,
                                   uint64_t seed, int32_t shard_id = 0,
                                   int32_t num_shards = 1);

// INVALID_ARGUMENT for a job that is not a DLRM, or whose model or
// embedding spec does not parse (the message says which).
absl::StatusOr<SparseStoreConfig> JobTablesConfig(const v1::JobSpec& job,
                                                  int32_t shard_id = 0,
                                                  int32_t num_shards = 1);

}  // namespace ferry

#endif  // FERRY_PS_JOB_TABLES_H_

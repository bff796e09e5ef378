// Where a DLRM job's embedding tables start from when it has --init-from:
// an export directory (ps/dlrm_export.h: DIR/embeddings.ckpt) or a ring
// DLRM job's checkpoint directory (common/ring_checkpoint.h: the tables in
// part 0 of its newest complete checkpoint, the one whose dense parameters
// proto/job_convert.h JobDenseInitialValues gives).
//
// A ring checkpoint carries no export metadata: what an id without a row
// reads as comes from the new job's --seed and --embedding-* flags, so a
// job continues the checkpointed one exactly only with the same flags.
//
// Thread safety: stateless; the store must not be used while it is filled.
#ifndef FERRY_PS_DLRM_INIT_H_
#define FERRY_PS_DLRM_INIT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/file_system.h"
#include "ps/sparse_store.h"

namespace ferry {

// Replaces `store`'s tables with those `init_from` holds (every row, or,
// with TableScope::kPlacedHere, those placed on the store's shard), their
// last-seen steps shifted below 0 (ps/tables_file.h). `dense_elements` is
// the job's dense size, which a ring checkpoint's state must have.
// Errors, prefixed with the path: an export's as RestoreTablesFile's; a
// ring checkpoint directory's as LoadNewestRingCheckpoint's, and
// FAILED_PRECONDITION when its checkpoint holds no tables (a hybrid job's
// ring checkpoints hold only the dense layers; its tables are in the PS
// shards' checkpoints). The store changes only on success.
absl::Status RestoreDlrmInitTables(const std::string& init_from,
                                   int64_t dense_elements, SparseStore& store,
                                   TableScope scope,
                                   FileSystem* fs = PosixFileSystem());

}  // namespace ferry

#endif  // FERRY_PS_DLRM_INIT_H_

#include "ps/dlrm_init.h"

#include "absl/strings/str_cat.h"
#include "common/ring_checkpoint.h"
#include "model/dlrm_weights.h"
#include "model/model_export.h"
#include "proto/job_convert.h"
#include "ps/tables_file.h"

namespace ferry {

absl::Status RestoreDlrmInitTables(const std::string& init_from,
                                   int64_t dense_elements, SparseStore& store,
                                   TableScope scope, FileSystem* fs) {
  if (!IsRingCheckpointDirectory(fs, init_from)) {
    return RestoreTablesFile(JoinPath(init_from, kDlrmEmbeddingsFile), store,
                             scope, fs);
  }
  absl::StatusOr<RingCheckpoint> ring =
      LoadNewestRingCheckpoint(fs, init_from, dense_elements);
  if (!ring.ok()) {
    return absl::Status(ring.status().code(),
                        absl::StrCat(init_from, ": ", ring.status().message()));
  }
  if (ring->tables.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        init_from, ": the ring checkpoint at version ", ring->version,
        " holds no embedding tables (a hybrid job's ring checkpoints hold its "
        "dense layers only; its tables are in the PS shards' checkpoints)"));
  }
  return RestoreTables(
      ring->tables,
      absl::StrCat(init_from, " (ring checkpoint ", ring->version, ")"), store,
      scope);
}

}  // namespace ferry

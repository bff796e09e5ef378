// A SparseStore's tables as one file, for model exports (worker/
// dlrm_export.h: DIR/embeddings.ckpt): a checkpoint file (common/
// checkpoint_io.h, format 3) of job kTablesFileJob with no dense buffers,
// whose table section (common/checkpoint_tables.h) holds every table's rows
// (ids, last-seen steps, values and row optimizer state), admission and
// event counters. Written streamed from the live store and read in place
// (the file mapped, its pages released behind the reader), as shard
// checkpoints are, so neither holds a second copy of the rows.
//
// Thread safety: the store must not change while it is written; a restore
// replaces the store's tables (SparseStore::Restore's rules).
#ifndef FERRY_PS_TABLES_FILE_H_
#define FERRY_PS_TABLES_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/checkpoint_tables.h"
#include "common/file_system.h"
#include "model/dlrm_weights.h"
#include "ps/sparse_store.h"

namespace ferry {

inline constexpr char kTablesFileJob[] = "ferry-dlrm-export";

// Writes `store`'s tables to `path` (atomically; its directory must exist).
absl::Status WriteTablesFile(const std::string& path, const SparseStore& store,
                             FileSystem* fs = PosixFileSystem());
// The same from sources (a ring member's tables in memory,
// TableCheckpointSources; a distributed job's merged from its shards,
// ps/merged_tables.h). INVALID_ARGUMENT when their headers do not pass
// ValidateTableSources; INTERNAL when a source gives other rows than its
// header says (the file is then not written).
absl::Status WriteTablesFile(const std::string& path,
                             absl::Span<const TablePartSource* const> tables,
                             FileSystem* fs = PosixFileSystem());

// Replaces `store`'s tables with the file's: every row (kAll: the store
// must hold them all, a one-shard store) or those placed on the store's
// shard (kPlacedHere: a PS shard of a job starting from the file). The
// rows' and pending counters' last-seen steps are shifted, in order, to
// end at step -1: the store's job counts its steps from 0 (TTL and memory
// evictions see the file's rows as seen before its first step). Errors,
// prefixed with the path: NOT_FOUND for a missing file, DATA_LOSS for a
// corrupt one, FAILED_PRECONDITION for another job's checkpoint or tables
// of other dims or row optimizer (the message says so), SparseStore::
// Restore's otherwise. The store changes only on success.
absl::Status RestoreTablesFile(const std::string& path, SparseStore& store,
                               TableScope scope,
                               FileSystem* fs = PosixFileSystem());

// The same from tables already in memory (a ring checkpoint's part 0,
// common/ring_checkpoint.h); errors are prefixed with `label`.
absl::Status RestoreTables(const std::vector<TableCheckpoint>& tables,
                           const std::string& label, SparseStore& store,
                           TableScope scope);

// What `config`'s tables read for ids without a row (the export's
// metadata, model/dlrm_weights.h), rows of `dim` floats.
DlrmTablesMeta TablesMetaOf(const SparseStoreConfig& config, int dim);

}  // namespace ferry

#endif  // FERRY_PS_TABLES_FILE_H_

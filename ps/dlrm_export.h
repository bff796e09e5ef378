// A trained DLRM (model/dlrm_spec.h) as a directory, and back:
//   DIR/model.json        DlrmToJson(spec) ("kind": "dlrm")
//   DIR/model.safetensors the dense parameters under DlrmParameterLayout's
//                         names ("bot_l.0.weight", ...; PyTorch's [out, in]
//                         shapes), F32; its metadata says what an id
//                         without a row reads as: "ferry.embedding.unseen"
//                         "initial" (InitialRowValue of
//                         "ferry.embedding.seed" and ".init_scale") or
//                         "zeros" (admission counts it)
//   DIR/embeddings.ckpt   every table's rows: ids, last-seen steps, values
//                         and row-wise optimizer state, admission and event
//                         counters (ps/tables_file.h: a checkpoint file
//                         whose table section is the tables).
// The tables are written streamed from the live store and read in place
// (the file mapped, its pages released behind the reader), as shard
// checkpoints are, so neither holds a second copy of the rows. An import
// continues training where the export stopped (the rows' optimizer state
// and counters come back; the dense optimizer starts afresh).
//
// Thread safety: pure functions over their arguments; the store must not
// change while it is exported.
#ifndef FERRY_PS_DLRM_EXPORT_H_
#define FERRY_PS_DLRM_EXPORT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/checkpoint_tables.h"
#include "common/file_system.h"
#include "model/dlrm_spec.h"
#include "model/dlrm_weights.h"
#include "ps/sparse_store.h"

namespace ferry {

// Writes DIR/model.json, DIR/model.safetensors and DIR/embeddings.ckpt
// (each replaced atomically; DIR is created). INVALID_ARGUMENT when
// `params` is not DlrmParameterLayout(spec)'s size; the file system's
// errors otherwise.
absl::Status ExportDlrm(const std::string& dir, const DlrmSpec& spec,
                        absl::Span<const float> params,
                        const SparseStore& store,
                        FileSystem* fs = PosixFileSystem());

// ExportDlrm of a distributed job: its dense parameters and its tables (a
// ring member's in memory; or its shards' parts merged as they are
// written, ps/merged_tables.h), described by `meta` (ps/tables_file.h
// TablesMetaOf of the job's tables config). Errors as ExportDlrm's, and
// INVALID_ARGUMENT for tables that do not pass ValidateTables
// (ValidateTableSources).
absl::Status ExportDlrm(const std::string& dir, const DlrmSpec& spec,
                        absl::Span<const float> params,
                        const std::vector<TableCheckpoint>& tables,
                        const DlrmTablesMeta& meta,
                        FileSystem* fs = PosixFileSystem());
absl::Status ExportDlrm(const std::string& dir, const DlrmSpec& spec,
                        absl::Span<const float> params,
                        absl::Span<const TablePartSource* const> tables,
                        const DlrmTablesMeta& meta,
                        FileSystem* fs = PosixFileSystem());

// Reads a directory ExportDlrm wrote into `store` (replacing its tables;
// their last-seen steps shifted below 0, ps/tables_file.h) and returns the
// dense parameters. The store's seed, admission count and initial values
// must be the export's (CheckTablesMetaFits: INVALID_ARGUMENT naming the
// flag). The directory's model must be
// `expected` (INVALID_ARGUMENT showing both otherwise); the weights file
// must hold exactly the layout's tensors with their shapes and finite
// values (INVALID_ARGUMENT naming the first that is not); the tables must
// be the store's with its row sizes, i.e. the same dims and row optimizer
// (FAILED_PRECONDITION, SparseStore::Restore's). NOT_FOUND for a missing
// file, DATA_LOSS for a corrupt embeddings file. The store changes only
// when everything else was read and checked, and not on error.
absl::StatusOr<std::vector<float>> ImportDlrm(
    const std::string& dir, const DlrmSpec& expected, SparseStore& store,
    FileSystem* fs = PosixFileSystem());

}  // namespace ferry

#endif  // FERRY_PS_DLRM_EXPORT_H_

#include "ps/tables_file.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint_io.h"
#include "common/status_macros.h"
#include "model/embedding_options.h"

namespace ferry {
namespace {

CheckpointIdentity TablesFileIdentity() {
  CheckpointIdentity identity;
  identity.job_id = kTablesFileJob;
  return identity;
}

absl::Status Prefixed(const std::string& path, const absl::Status& s,
                      absl::string_view hint = "") {
  return absl::Status(s.code(), absl::StrCat(path, ": ", s.message(), hint));
}

}  // namespace

absl::Status WriteTablesFile(const std::string& path,
                             absl::Span<const TablePartSource* const> tables,
                             FileSystem* fs) {
  RETURN_IF_ERROR(ValidateTableSources(tables));
  CheckpointDenseView dense;
  dense.identity = TablesFileIdentity();
  ASSIGN_OR_RETURN(std::unique_ptr<AtomicFile> file, fs->NewAtomicFile(path));
  RETURN_IF_ERROR(EncodeCheckpointTo(dense, tables, *file));
  return file->Commit();
}

absl::Status WriteTablesFile(const std::string& path, const SparseStore& store,
                             FileSystem* fs) {
  const std::vector<std::unique_ptr<TablePartSource>> sources =
      store.CheckpointSources();
  std::vector<const TablePartSource*> tables;
  for (const auto& source : sources) tables.push_back(source.get());
  return WriteTablesFile(path, tables, fs);
}

namespace {

// RestoreTablesFile's restore of tables read from `label` (a path):
// `release` is told of the bytes as they are read.
absl::Status RestoreTableViews(absl::Span<const TableCheckpointView> tables,
                               const BytesDone& release,
                               const std::string& label, SparseStore& store,
                               TableScope scope) {
  // The newest last-seen step, to shift the file's steps below 0.
  int64_t newest = -1;
  for (const TableCheckpointView& t : tables) {
    for (size_t i = 0; i < t.last_seen.size(); ++i) {
      newest = std::max(newest, t.last_seen[i]);
    }
    for (size_t i = 0; i < t.pending_last_seen.size(); ++i) {
      newest = std::max(newest, t.pending_last_seen[i]);
    }
    release(t.last_seen.bytes(0, t.last_seen.size()));
  }
  TableRestoreOptions options;
  options.scope = scope;
  options.last_seen_shift = newest + 1;
  if (absl::Status s = store.Restore(tables, release, options); !s.ok()) {
    const bool row_size = absl::StrContains(s.message(), "floats per row");
    return Prefixed(label, s,
                    row_size ? " (written with another --embedding-optimizer "
                               "or embedding dimension?)"
                             : "");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RestoreTablesFile(const std::string& path, SparseStore& store,
                               TableScope scope, FileSystem* fs) {
  ASSIGN_OR_RETURN(const MappedCheckpoint mapped,
                   MapCheckpoint(fs, path, TablesFileIdentity()));
  return RestoreTableViews(mapped.view.tables, mapped.releaser(), path, store,
                           scope);
}

absl::Status RestoreTables(const std::vector<TableCheckpoint>& tables,
                           const std::string& label, SparseStore& store,
                           TableScope scope) {
  const std::vector<TableCheckpointView> views = ViewsOf(tables);
  return RestoreTableViews(
      views, [](absl::string_view) {}, label, store, scope);
}

DlrmTablesMeta TablesMetaOf(const SparseStoreConfig& config, int dim) {
  DlrmTablesMeta meta;
  meta.seed = config.seed;
  meta.init_scale = ResolvedInitScale(config.init_scale, dim);
  meta.admit_count = std::max(config.admit_count, 1);
  meta.zero_initial = RowsStartAtZero(config.optimizer);
  meta.row_optimizer = RowOptimizerKindName(config.optimizer.kind);
  return meta;
}

}  // namespace ferry

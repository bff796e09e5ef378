#include "ps/dlrm_export.h"

#include <cmath>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "model/dlrm_weights.h"
#include "model/model_export.h"
#include "ps/tables_file.h"

namespace ferry {

absl::Status ExportDlrm(const std::string& dir, const DlrmSpec& spec,
                        absl::Span<const float> params,
                        const SparseStore& store, FileSystem* fs) {
  // Refused before anything is written.
  RETURN_IF_ERROR(CheckDlrmParams(spec, params));
  RETURN_IF_ERROR(fs->CreateDirectories(dir));
  RETURN_IF_ERROR(
      WriteTablesFile(JoinPath(dir, kDlrmEmbeddingsFile), store, fs));
  // What an id without a row reads as (serving needs it) goes with them.
  return WriteDlrmWeights(dir, spec, params,
                          TablesMetaOf(store.config(), spec.embedding_dim), fs);
}

absl::StatusOr<std::vector<TableCheckpoint>> MergeShardTables(
    std::vector<std::vector<TableCheckpoint>> shards) {
  if (shards.empty()) return std::vector<TableCheckpoint>();
  std::vector<TableCheckpoint> merged = std::move(shards.front());
  for (size_t s = 1; s < shards.size(); ++s) {
    std::vector<TableCheckpoint>& parts = shards[s];
    if (parts.size() != merged.size()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("shard %d holds %d tables, shard 0 %d", s,
                          parts.size(), merged.size()));
    }
    for (size_t t = 0; t < parts.size(); ++t) {
      TableCheckpoint& into = merged[t];
      TableCheckpoint& part = parts[t];
      if (part.table != into.table || part.row_floats != into.row_floats) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "shard %d's table %d (%d floats a row) is not shard 0's table %d "
            "(%d floats a row)",
            s, part.table, part.row_floats, into.table, into.row_floats));
      }
      const auto append = [](auto& to, auto& from) {
        to.insert(to.end(), from.begin(), from.end());
        from = {};
      };
      append(into.ids, part.ids);
      append(into.last_seen, part.last_seen);
      append(into.values, part.values);
      append(into.pending_ids, part.pending_ids);
      append(into.pending_counts, part.pending_counts);
      append(into.pending_last_seen, part.pending_last_seen);
      if (into.counters.has_value() && part.counters.has_value()) {
        into.counters->rows_created += part.counters->rows_created;
        into.counters->ids_admitted += part.counters->ids_admitted;
        into.counters->updates_dropped += part.counters->updates_dropped;
        into.counters->evicted_ttl += part.counters->evicted_ttl;
        into.counters->evicted_memory += part.counters->evicted_memory;
      } else {
        into.counters.reset();
      }
    }
  }
  return merged;
}

absl::Status ExportDlrm(const std::string& dir, const DlrmSpec& spec,
                        absl::Span<const float> params,
                        const std::vector<TableCheckpoint>& tables,
                        const DlrmTablesMeta& meta, FileSystem* fs) {
  RETURN_IF_ERROR(CheckDlrmParams(spec, params));
  RETURN_IF_ERROR(ValidateTables(tables));
  RETURN_IF_ERROR(fs->CreateDirectories(dir));
  RETURN_IF_ERROR(
      WriteTablesFile(JoinPath(dir, kDlrmEmbeddingsFile), tables, fs));
  return WriteDlrmWeights(dir, spec, params, meta, fs);
}

absl::StatusOr<std::vector<float>> ImportDlrm(const std::string& dir,
                                              const DlrmSpec& expected,
                                              SparseStore& store,
                                              FileSystem* fs) {
  DlrmTablesMeta exported;
  ASSIGN_OR_RETURN(std::vector<float> params,
                   ReadDlrmWeights(dir, expected, fs, &exported));
  RETURN_IF_ERROR(CheckTablesMetaFits(
      exported, TablesMetaOf(store.config(), expected.embedding_dim)));
  RETURN_IF_ERROR(RestoreTablesFile(JoinPath(dir, kDlrmEmbeddingsFile), store,
                                    TableScope::kAll, fs));
  return params;
}

}  // namespace ferry

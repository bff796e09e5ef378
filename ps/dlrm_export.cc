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

absl::Status ExportDlrm(const std::string& dir, const DlrmSpec& spec,
                        absl::Span<const float> params,
                        const std::vector<TableCheckpoint>& tables,
                        const DlrmTablesMeta& meta, FileSystem* fs) {
  RETURN_IF_ERROR(ValidateTables(tables));
  const TableCheckpointSources sources(tables);
  return ExportDlrm(dir, spec, params, sources.pointers(), meta, fs);
}

absl::Status ExportDlrm(const std::string& dir, const DlrmSpec& spec,
                        absl::Span<const float> params,
                        absl::Span<const TablePartSource* const> tables,
                        const DlrmTablesMeta& meta, FileSystem* fs) {
  // Refused before anything is written.
  RETURN_IF_ERROR(CheckDlrmParams(spec, params));
  RETURN_IF_ERROR(ValidateTableSources(tables));
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

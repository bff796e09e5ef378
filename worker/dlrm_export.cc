#include "worker/dlrm_export.h"

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
  ASSIGN_OR_RETURN(const ParameterLayout layout, DlrmParameterLayout(spec));
  if (static_cast<int64_t>(params.size()) != layout.total_elements()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DLRM export: ", params.size(), " dense parameters for a model of ",
        layout.total_elements()));
  }
  // What an id without a row reads as (serving needs it): its initial
  // values (compute/row_optimizer_math.h InitialRowValue of this seed and
  // scale), or zeros while admission counts it.
  const SparseStoreConfig& tables_config = store.config();
  const float scale =
      tables_config.init_scale > 0.0f
          ? tables_config.init_scale
          : 1.0f / std::sqrt(static_cast<float>(spec.embedding_dim));
  const std::map<std::string, std::string> metadata = {
      {"ferry.embedding.seed", absl::StrCat(tables_config.seed)},
      {"ferry.embedding.init_scale",
       absl::StrFormat("%.9g", scale)},  // exact as float
      {"ferry.embedding.unseen",
       tables_config.admit_count > 1 ? "zeros" : "initial"},
      // With admission, a pending id counted admit_count times reads
      // initial.
      {"ferry.embedding.admit_count", absl::StrCat(tables_config.admit_count)},
  };
  RETURN_IF_ERROR(fs->CreateDirectories(dir));
  RETURN_IF_ERROR(
      WriteTablesFile(JoinPath(dir, kDlrmEmbeddingsFile), store, fs));
  return WriteDlrmWeights(dir, spec, params, metadata, fs);
}

absl::StatusOr<std::vector<float>> ImportDlrm(const std::string& dir,
                                              const DlrmSpec& expected,
                                              SparseStore& store,
                                              FileSystem* fs) {
  ASSIGN_OR_RETURN(std::vector<float> params,
                   ReadDlrmWeights(dir, expected, fs));
  RETURN_IF_ERROR(RestoreTablesFile(JoinPath(dir, kDlrmEmbeddingsFile), store,
                                    TableScope::kAll, fs));
  return params;
}

}  // namespace ferry

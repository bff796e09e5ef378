#include "worker/dlrm_export.h"

#include <cmath>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checkpoint_io.h"
#include "common/status_macros.h"
#include "model/model_export.h"
#include "model/safetensors.h"

namespace ferry {
namespace {

CheckpointIdentity ExportIdentity() {
  CheckpointIdentity identity;
  identity.job_id = kDlrmExportJob;
  return identity;
}

}  // namespace

absl::Status ExportDlrm(const std::string& dir, const DlrmSpec& spec,
                        absl::Span<const float> params,
                        const SparseStore& store, FileSystem* fs) {
  ASSIGN_OR_RETURN(const ParameterLayout layout, DlrmParameterLayout(spec));
  if (static_cast<int64_t>(params.size()) != layout.total_elements()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DLRM export: ", params.size(), " dense parameters for a model of ",
        layout.total_elements()));
  }
  SafetensorsFile weights;
  weights.metadata["format"] = "pt";
  weights.metadata["ferry.model"] = kDlrmKind;
  // What an id without a row reads as (serving needs it): its initial
  // values (compute/row_optimizer_math.h InitialRowValue of this seed and
  // scale), or zeros while admission counts it.
  const SparseStoreConfig& tables_config = store.config();
  const float scale =
      tables_config.init_scale > 0.0f
          ? tables_config.init_scale
          : 1.0f / std::sqrt(static_cast<float>(spec.embedding_dim));
  weights.metadata["ferry.embedding.seed"] = absl::StrCat(tables_config.seed);
  weights.metadata["ferry.embedding.init_scale"] =
      absl::StrFormat("%.9g", scale);  // exact as float
  weights.metadata["ferry.embedding.unseen"] =
      tables_config.admit_count > 1 ? "zeros" : "initial";
  // With admission, a pending id counted admit_count times reads initial.
  weights.metadata["ferry.embedding.admit_count"] =
      absl::StrCat(tables_config.admit_count);
  for (const TensorSlot& t : layout.tensors()) {
    SafetensorsTensor tensor;
    tensor.name = t.name;
    tensor.shape = t.shape;
    tensor.values.assign(params.begin() + t.offset,
                         params.begin() + t.offset + t.numel);
    weights.tensors.push_back(std::move(tensor));
  }
  ASSIGN_OR_RETURN(const std::string bytes, EncodeSafetensors(weights));
  RETURN_IF_ERROR(fs->CreateDirectories(dir));
  // The rows, streamed from the live tables into the file.
  const std::vector<std::unique_ptr<TablePartSource>> sources =
      store.CheckpointSources();
  std::vector<const TablePartSource*> tables;
  for (const auto& source : sources) tables.push_back(source.get());
  RETURN_IF_ERROR(ValidateTableSources(tables));
  CheckpointDenseView dense;
  dense.identity = ExportIdentity();
  ASSIGN_OR_RETURN(std::unique_ptr<AtomicFile> file,
                   fs->NewAtomicFile(JoinPath(dir, kDlrmEmbeddingsFile)));
  RETURN_IF_ERROR(EncodeCheckpointTo(dense, tables, *file));
  RETURN_IF_ERROR(file->Commit());
  RETURN_IF_ERROR(
      fs->WriteFileAtomically(JoinPath(dir, kModelWeightsFile), bytes));
  return fs->WriteFileAtomically(JoinPath(dir, kModelJsonFile),
                                 DlrmToJson(spec) + "\n");
}

absl::StatusOr<std::vector<float>> ImportDlrm(const std::string& dir,
                                              const DlrmSpec& expected,
                                              SparseStore& store,
                                              FileSystem* fs) {
  const std::string json_path = JoinPath(dir, kModelJsonFile);
  const std::string weights_path = JoinPath(dir, kModelWeightsFile);
  const std::string tables_path = JoinPath(dir, kDlrmEmbeddingsFile);
  ASSIGN_OR_RETURN(const std::string json, fs->ReadFile(json_path));
  absl::StatusOr<DlrmSpec> spec = ParseDlrmJson(json);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(json_path, ": ", spec.status().message()));
  }
  if (!(*spec == expected)) {
    return absl::InvalidArgumentError(absl::StrCat(
        json_path, " is another model than the job's: ", DlrmToJson(*spec),
        " vs ", DlrmToJson(expected)));
  }
  ASSIGN_OR_RETURN(const ParameterLayout layout, DlrmParameterLayout(*spec));
  ASSIGN_OR_RETURN(const SafetensorsFile weights,
                   ReadWeightsFile(fs, weights_path));
  std::map<std::string, const SafetensorsTensor*> tensors;
  for (const SafetensorsTensor& t : weights.tensors) tensors[t.name] = &t;
  std::vector<float> params;
  RETURN_IF_ERROR(TakeLayoutTensors(weights_path, layout, tensors, params));
  RETURN_IF_ERROR(RefuseLeftoverTensors(weights_path, json_path, tensors));
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, fs->MapFile(tables_path));
  MappedFile* mapped = file.get();
  const auto release = [mapped](absl::string_view part) {
    mapped->Release(part);
  };
  absl::StatusOr<CheckpointView> view =
      DecodeCheckpointView(file->bytes(), release);
  if (!view.ok()) {
    return absl::Status(
        view.status().code(),
        absl::StrCat(tables_path, ": ", view.status().message()));
  }
  if (absl::Status s = CheckIdentityOf(view->identity, ExportIdentity());
      !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(tables_path, ": ", s.message()));
  }
  if (absl::Status s = store.Restore(view->tables, release); !s.ok()) {
    return absl::Status(
        s.code(),
        absl::StrCat(tables_path, ": ", s.message(),
                     absl::IsFailedPrecondition(s)
                         ? " (exported with another --embedding-optimizer?)"
                         : ""));
  }
  return params;
}

}  // namespace ferry

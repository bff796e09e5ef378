#include "model/dlrm_weights.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/model_export.h"
#include "model/safetensors.h"

namespace ferry {

absl::Status WriteDlrmWeights(
    const std::string& dir, const DlrmSpec& spec,
    absl::Span<const float> params,
    const std::map<std::string, std::string>& metadata, FileSystem* fs) {
  ASSIGN_OR_RETURN(const ParameterLayout layout, DlrmParameterLayout(spec));
  if (static_cast<int64_t>(params.size()) != layout.total_elements()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DLRM export: ", params.size(), " dense parameters for a model of ",
        layout.total_elements()));
  }
  SafetensorsFile weights;
  weights.metadata = metadata;
  weights.metadata["format"] = "pt";
  weights.metadata["ferry.model"] = kDlrmKind;
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
  RETURN_IF_ERROR(
      fs->WriteFileAtomically(JoinPath(dir, kModelWeightsFile), bytes));
  return fs->WriteFileAtomically(JoinPath(dir, kModelJsonFile),
                                 DlrmToJson(spec) + "\n");
}

absl::StatusOr<std::vector<float>> ReadDlrmWeights(const std::string& dir,
                                                   const DlrmSpec& expected,
                                                   FileSystem* fs) {
  const std::string json_path = JoinPath(dir, kModelJsonFile);
  const std::string weights_path = JoinPath(dir, kModelWeightsFile);
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
  return params;
}

}  // namespace ferry

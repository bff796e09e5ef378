// What a cost prediction is about: a model's tensor sizes from a preset,
// one of ferry's model specs or a PyTorch model's weights file
// (client/cost_model.h ModelTensorSizes, ResolveModel, ModelPresets).
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cost_model.h"
#include "common/file_system.h"
#include "common/status_macros.h"
#include "model/model_export.h"
#include "model/model_params.h"
#include "model/model_presets.h"

namespace ferry {
namespace {

// The weights file `spec` names when it is a model that is not ferry's
// (see ModelTensorSizes); nullopt otherwise.
std::optional<std::string> WeightsFileOf(const std::string& spec,
                                         FileSystem* fs) {
  if (absl::EndsWith(spec, ".safetensors")) return spec;
  // A directory with model.safetensors and no model.json: not a ferry model
  // export (ResolveModelSpec takes those), a --model external job's.
  if (!fs->ListDirectory(spec).ok()) return std::nullopt;
  const std::string weights = JoinPath(spec, "model.safetensors");
  if (!fs->ReadFile(JoinPath(spec, "model.json")).ok() &&
      fs->MapFile(weights).ok()) {
    return weights;
  }
  return std::nullopt;
}

absl::StatusOr<std::vector<int64_t>> WeightsFileTensorSizes(
    const std::string& path, FileSystem* fs) {
  ASSIGN_OR_RETURN(const SafetensorsFile file, ReadWeightsFile(fs, path));
  std::vector<int64_t> sizes;
  for (const SafetensorsTensor& t : file.tensors) {
    int64_t n = 1;
    for (const int64_t d : t.shape) n *= d;
    if (n > 0) sizes.push_back(n);
  }
  if (sizes.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": no tensor with elements"));
  }
  return sizes;
}

}  // namespace

bool IsPyTorchModelWeights(const std::string& spec) {
  return WeightsFileOf(spec, PosixFileSystem()).has_value();
}

absl::StatusOr<std::vector<int64_t>> ModelTensorSizes(const std::string& spec) {
  if (std::optional<std::string> weights =
          WeightsFileOf(spec, PosixFileSystem())) {
    return WeightsFileTensorSizes(*weights, PosixFileSystem());
  }
  ASSIGN_OR_RETURN(ModelDef def, ResolveModelSpec(spec));
  ASSIGN_OR_RETURN(ParameterLayout layout, ModelJobLayout(def));
  return layout.TensorSizes();
}

const std::vector<ModelPreset>& ModelPresets() {
  static const auto* presets = new std::vector<ModelPreset>{
      {"fashion-mlp", "784-256-128-10",
       "the Fashion-MNIST MLP, 235k parameters"},
      {"resnet50", "1024-4096-4096-1024",
       "ResNet-50-sized synthetic MLP, 25.2M parameters"},
      {"bert-base", "1024-8192-8192-4096",
       "BERT-base-sized synthetic MLP, 109M parameters"},
  };
  return *presets;
}

absl::StatusOr<std::string> ResolveModel(const std::string& name_or_spec) {
  for (const ModelPreset& p : ModelPresets()) {
    if (p.name == name_or_spec) return p.mlp_spec;
  }
  if (WeightsFileOf(name_or_spec, PosixFileSystem()).has_value())
    return name_or_spec;
  const absl::StatusOr<ModelDef> def = ResolveModelSpec(name_or_spec);
  if (def.ok()) return name_or_spec;
  std::string names;
  for (const ModelPreset& p : ModelPresets())
    absl::StrAppend(&names, names.empty() ? "" : ", ", p.name);
  for (const std::string& p : ModelPresetNames())
    absl::StrAppend(&names, ", ", p);
  return absl::InvalidArgumentError(absl::StrCat(
      "model '", name_or_spec, "': expected a preset (", names,
      "), a ferry.model.v1 JSON file, a model.safetensors (or a directory "
      "holding one: a --model external job's export) or an MLP spec like "
      "784-256-128-10 (",
      def.status().message(), ")"));
}

}  // namespace ferry

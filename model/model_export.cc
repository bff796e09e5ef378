#include "model/model_export.h"

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "model/model_params.h"
#include "model/safetensors.h"
#include "model/shape_inference.h"
#include "nlohmann/json.hpp"

namespace ferry {
namespace {

std::string Join(const std::string& dir, const char* file) {
  return dir.empty() || dir.back() == '/' ? dir + file : dir + "/" + file;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The layer entries of ModelToJson(def), for messages.
std::vector<std::string> LayerTexts(const ModelDef& def) {
  std::vector<std::string> out;
  const nlohmann::json j = nlohmann::json::parse(ModelToJson(def));
  for (const nlohmann::json& layer : j["layers"]) out.push_back(layer.dump());
  return out;
}

}  // namespace

absl::Status TakeLayoutTensors(
    const std::string& path, const ParameterLayout& layout,
    std::map<std::string, const SafetensorsTensor*>& tensors,
    std::vector<float>& values) {
  values.assign(layout.total_elements(), 0.0f);
  for (const TensorSlot& slot : layout.tensors()) {
    auto it = tensors.find(slot.name);
    if (it == tensors.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor '", slot.name, "' ",
                       ShapeText(slot.shape), " of the model is missing"));
    }
    const SafetensorsTensor& t = *it->second;
    if (t.shape != slot.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor '", slot.name, "' has shape ", ShapeText(t.shape),
          ", the model's is ", ShapeText(slot.shape)));
    }
    for (size_t i = 0; i < t.values.size(); ++i) {
      if (!std::isfinite(t.values[i])) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": tensor '", slot.name,
                         "' holds a non-finite value at element ", i));
      }
    }
    std::copy(t.values.begin(), t.values.end(), values.begin() + slot.offset);
    tensors.erase(it);
  }
  return absl::OkStatus();
}

absl::StatusOr<SafetensorsFile> ReadWeightsFile(FileSystem* fs,
                                                const std::string& path) {
  ASSIGN_OR_RETURN(const std::string bytes, fs->ReadFile(path));
  absl::StatusOr<SafetensorsFile> file = DecodeSafetensors(bytes);
  if (!file.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", file.status().message()));
  }
  return file;
}

absl::Status RefuseLeftoverTensors(
    const std::string& path, const std::string& json_path,
    const std::map<std::string, const SafetensorsTensor*>& tensors) {
  if (tensors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": tensor '", tensors.begin()->first,
                   "' is not a tensor of the model in ", json_path));
}

std::string JoinPath(const std::string& dir, const char* file) {
  return Join(dir, file);
}

absl::StatusOr<std::string> EncodeLayoutValues(
    const ParameterLayout& layout, absl::Span<const float> values,
    std::map<std::string, std::string> metadata) {
  if (static_cast<int64_t>(values.size()) != layout.total_elements()) {
    return absl::InvalidArgumentError(absl::StrCat("export: ", values.size(),
                                                   " values for tensors of ",
                                                   layout.total_elements()));
  }
  SafetensorsFile file;
  file.metadata = std::move(metadata);
  file.metadata["format"] = "pt";
  for (const TensorSlot& t : layout.tensors()) {
    file.tensors.push_back(
        {t.name, t.shape, SafetensorsDtype::kF32,
         std::vector<float>(values.begin() + t.offset,
                            values.begin() + t.offset + t.numel)});
  }
  return EncodeSafetensors(file);
}

absl::Status ExportLayoutValues(const std::string& dir,
                                const ParameterLayout& layout,
                                absl::Span<const float> values,
                                FileSystem* fs) {
  ASSIGN_OR_RETURN(const std::string bytes, EncodeLayoutValues(layout, values));
  RETURN_IF_ERROR(fs->CreateDirectories(dir));
  return fs->WriteFileAtomically(Join(dir, kModelWeightsFile), bytes);
}

absl::Status ExportModel(const std::string& dir, const ModelValues& model,
                         FileSystem* fs) {
  ASSIGN_OR_RETURN(ParameterLayout params, ModelParameterLayout(model.def));
  ASSIGN_OR_RETURN(ParameterLayout state, ModelStateLayout(model.def));
  if (static_cast<int64_t>(model.params.size()) != params.total_elements() ||
      static_cast<int64_t>(model.state.size()) != state.total_elements()) {
    return absl::InvalidArgumentError(
        absl::StrCat("export: ", model.params.size(), " parameters and ",
                     model.state.size(), " state values for a model of ",
                     params.total_elements(), " and ", state.total_elements()));
  }
  SafetensorsFile file;
  file.metadata["format"] = "pt";
  file.metadata["ferry.model"] = kModelFormatV1;
  // state_dict order: each layer's parameters, then its state.
  std::map<int64_t, std::vector<SafetensorsTensor>> by_layer;
  const auto add = [&](const ParameterLayout& layout,
                       const std::vector<float>& values) {
    for (const TensorSlot& t : layout.tensors()) {
      SafetensorsTensor tensor;
      tensor.name = t.name;
      tensor.shape = t.shape;
      tensor.dtype = EndsWith(t.name, ".num_batches_tracked")
                         ? SafetensorsDtype::kI64
                         : SafetensorsDtype::kF32;
      tensor.values.assign(values.begin() + t.offset,
                           values.begin() + t.offset + t.numel);
      by_layer[std::stoll(t.name.substr(0, t.name.find('.')))].push_back(
          std::move(tensor));
    }
  };
  add(params, model.params);
  add(state, model.state);
  for (auto& [layer, tensors] : by_layer) {
    for (SafetensorsTensor& t : tensors) file.tensors.push_back(std::move(t));
  }
  ASSIGN_OR_RETURN(std::string bytes, EncodeSafetensors(file));
  RETURN_IF_ERROR(fs->CreateDirectories(dir));
  RETURN_IF_ERROR(fs->WriteFileAtomically(Join(dir, kModelWeightsFile), bytes));
  return fs->WriteFileAtomically(Join(dir, kModelJsonFile),
                                 ModelToJson(model.def) + "\n");
}

absl::StatusOr<ModelValues> ImportModel(const std::string& dir,
                                        FileSystem* fs) {
  const std::string json_path = Join(dir, kModelJsonFile);
  const std::string weights_path = Join(dir, kModelWeightsFile);
  ASSIGN_OR_RETURN(std::string json, fs->ReadFile(json_path));
  ModelValues out;
  absl::StatusOr<ModelDef> def = ParseModelJson(json);
  if (!def.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(json_path, ": ", def.status().message()));
  }
  out.def = *std::move(def);
  ASSIGN_OR_RETURN(const SafetensorsFile file,
                   ReadWeightsFile(fs, weights_path));
  std::map<std::string, const SafetensorsTensor*> tensors;
  for (const SafetensorsTensor& t : file.tensors) tensors[t.name] = &t;
  ASSIGN_OR_RETURN(ParameterLayout params, ModelParameterLayout(out.def));
  ASSIGN_OR_RETURN(ParameterLayout state, ModelStateLayout(out.def));
  RETURN_IF_ERROR(TakeLayoutTensors(weights_path, params, tensors, out.params));
  RETURN_IF_ERROR(TakeLayoutTensors(weights_path, state, tensors, out.state));
  RETURN_IF_ERROR(RefuseLeftoverTensors(weights_path, json_path, tensors));
  return out;
}

absl::Status CheckSameModel(const ModelDef& expected,
                            const ModelDef& imported) {
  if (expected.input.shape != imported.input.shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the imported model's input is ", ShapeText(imported.input.shape),
        ", the job's is ", ShapeText(expected.input.shape)));
  }
  if (expected.classes != imported.classes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the imported model has ", imported.classes,
                     " classes, the job's ", expected.classes));
  }
  const std::vector<std::string> want = LayerTexts(expected);
  const std::vector<std::string> got = LayerTexts(imported);
  for (size_t i = 0; i < std::max(want.size(), got.size()); ++i) {
    if (i >= got.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the imported model ends before layer ", i, " ", want[i]));
    }
    if (i >= want.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the imported model has an extra layer ", i, " ", got[i]));
    }
    if (want[i] != got[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer ", i, " differs: the job's is ", want[i],
                       ", the imported model's ", got[i]));
    }
  }
  return absl::OkStatus();
}

}  // namespace ferry

#include "model/dlrm_spec.h"

#include <cmath>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compute/ctr_math.h"
#include "model/model_def.h"
#include "model/model_file.h"
#include "model/normal_init.h"
#include "nlohmann/json.hpp"

namespace ferry {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

absl::Status CheckSize(const std::string& what, int64_t v, int64_t max) {
  if (v >= 1 && v <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("dlrm: ", what, " is ", v, ", must be in [1, ", max, "]"));
}

absl::StatusOr<int> JsonSize(const std::string& key, const Json& v,
                             int64_t max) {
  if (!v.is_number_integer()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dlrm: '", key, "' must be a positive integer, got ", v.dump()));
  }
  const int64_t i = v.get<int64_t>();
  RETURN_IF_ERROR(CheckSize(absl::StrCat("'", key, "'"), i, max));
  return static_cast<int>(i);
}

absl::StatusOr<std::vector<int>> JsonWidths(const std::string& key,
                                            const Json& v) {
  if (!v.is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dlrm: '", key, "' must be an array of layer widths, got ", v.dump()));
  }
  std::vector<int> widths;
  for (size_t i = 0; i < v.size(); ++i) {
    ASSIGN_OR_RETURN(
        int w, JsonSize(absl::StrCat(key, "[", i, "]"), v[i], kDlrmMaxWidth));
    widths.push_back(w);
  }
  return widths;
}

// Appends "<prefix>.<2l>.weight" [out, in] and ".bias" [out] per layer.
void AppendMlp(const std::string& prefix, const std::vector<int64_t>& sizes,
               std::vector<ParameterLayout::TensorDef>* defs) {
  for (size_t l = 0; l + 1 < sizes.size(); ++l) {
    const std::string name = absl::StrCat(prefix, ".", 2 * l, ".");
    defs->push_back({name + "weight", {sizes[l + 1], sizes[l]}});
    defs->push_back({name + "bias", {sizes[l + 1]}});
  }
}

}  // namespace

absl::Status ValidateDlrmSpec(const DlrmSpec& s) {
  RETURN_IF_ERROR(CheckSize("dense_features", s.dense_features, kDlrmMaxWidth));
  RETURN_IF_ERROR(CheckSize("num_fields", s.num_fields, kDlrmMaxFields));
  RETURN_IF_ERROR(CheckSize("embedding_dim", s.embedding_dim, kDlrmMaxWidth));
  for (size_t i = 0; i < s.bottom.size(); ++i) {
    RETURN_IF_ERROR(
        CheckSize(absl::StrCat("bottom[", i, "]"), s.bottom[i], kDlrmMaxWidth));
  }
  for (size_t i = 0; i < s.top.size(); ++i) {
    RETURN_IF_ERROR(
        CheckSize(absl::StrCat("top[", i, "]"), s.top[i], kDlrmMaxWidth));
  }
  if (s.pooling != Pooling::kSum && s.pooling != Pooling::kMean) {
    return absl::InvalidArgumentError("dlrm: unknown pooling");
  }
  return absl::OkStatus();
}

int64_t DlrmInteractionFeatures(const DlrmSpec& s) {
  return s.embedding_dim + DotInteractionPairs(int64_t{s.num_fields} + 1);
}

std::vector<int64_t> DlrmBottomSizes(const DlrmSpec& s) {
  std::vector<int64_t> sizes = {s.dense_features};
  sizes.insert(sizes.end(), s.bottom.begin(), s.bottom.end());
  sizes.push_back(s.embedding_dim);
  return sizes;
}

std::vector<int64_t> DlrmTopSizes(const DlrmSpec& s) {
  std::vector<int64_t> sizes = {DlrmInteractionFeatures(s)};
  sizes.insert(sizes.end(), s.top.begin(), s.top.end());
  sizes.push_back(1);
  return sizes;
}

std::vector<std::string> DlrmPresetNames() { return {kDlrmKind}; }

absl::StatusOr<DlrmSpec> DlrmPreset(std::string_view name) {
  if (name == kDlrmKind) return DlrmSpec{};
  return absl::NotFoundError(
      absl::StrCat("no DLRM preset '", std::string(name), "' (presets: dlrm)"));
}

bool IsDlrmJson(std::string_view text) {
  const Json root = Json::parse(text.begin(), text.end(), nullptr,
                                /*allow_exceptions=*/false);
  if (!root.is_object()) return false;
  auto kind = root.find("kind");
  return kind != root.end() && *kind == kDlrmKind;
}

absl::StatusOr<DlrmSpec> ParseDlrmJson(std::string_view text) {
  Json root;
  try {
    root = Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {  // parse_error, number overflow
    return absl::InvalidArgumentError(
        absl::StrCat("dlrm: model JSON does not parse: ", e.what()));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError("dlrm: model JSON must be an object");
  }
  auto format = root.find("format");
  if (format == root.end() || *format != kModelFormatV1) {
    return absl::InvalidArgumentError(
        absl::StrCat("dlrm: \"format\" must be \"", kModelFormatV1, "\", got ",
                     format == root.end() ? "nothing" : format->dump()));
  }
  auto kind = root.find("kind");
  if (kind == root.end() || *kind != kDlrmKind) {
    return absl::InvalidArgumentError(
        absl::StrCat("dlrm: \"kind\" must be \"dlrm\", got ",
                     kind == root.end() ? "nothing" : kind->dump()));
  }
  DlrmSpec s;
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& key = it.key();
    const Json& v = it.value();
    if (key == "format" || key == "kind") continue;
    if (key == "dense_features") {
      ASSIGN_OR_RETURN(s.dense_features, JsonSize(key, v, kDlrmMaxWidth));
    } else if (key == "num_fields") {
      ASSIGN_OR_RETURN(s.num_fields, JsonSize(key, v, kDlrmMaxFields));
    } else if (key == "embedding_dim") {
      ASSIGN_OR_RETURN(s.embedding_dim, JsonSize(key, v, kDlrmMaxWidth));
    } else if (key == "bottom") {
      ASSIGN_OR_RETURN(s.bottom, JsonWidths(key, v));
    } else if (key == "top") {
      ASSIGN_OR_RETURN(s.top, JsonWidths(key, v));
    } else if (key == "pooling") {
      if (!v.is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "dlrm: 'pooling' must be \"sum\" or \"mean\", got ", v.dump()));
      }
      absl::StatusOr<Pooling> p = ParsePooling(v.get<std::string>());
      if (!p.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("dlrm: ", p.status().message()));
      }
      s.pooling = *p;
    } else if (key == "interaction") {
      if (v != "dot") {
        return absl::InvalidArgumentError(
            absl::StrCat("dlrm: 'interaction' = ", v.dump(),
                         " is not supported (only "
                         "\"dot\")"));
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "dlrm: unknown key '", key,
          "' (known: format, kind, dense_features, num_fields, embedding_dim, "
          "bottom, top, pooling, interaction)"));
    }
  }
  RETURN_IF_ERROR(ValidateDlrmSpec(s));
  return s;
}

std::string DlrmToJson(const DlrmSpec& s) {
  OrderedJson root = OrderedJson::object();
  root["format"] = kModelFormatV1;
  root["kind"] = kDlrmKind;
  root["dense_features"] = s.dense_features;
  root["num_fields"] = s.num_fields;
  root["embedding_dim"] = s.embedding_dim;
  root["bottom"] = s.bottom;
  root["top"] = s.top;
  root["pooling"] = PoolingName(s.pooling);
  root["interaction"] = "dot";
  return root.dump(2) + "\n";
}

absl::StatusOr<DlrmSpec> ResolveDlrmSpec(const std::string& text,
                                         FileSystem* fs) {
  if (absl::StatusOr<DlrmSpec> preset = DlrmPreset(text); preset.ok()) {
    return preset;
  }
  absl::StatusOr<ModelFile> file = ReadModelFile(text, fs);
  if (!file.ok()) {
    return absl::Status(
        absl::IsNotFound(file.status()) ? absl::StatusCode::kNotFound
                                        : absl::StatusCode::kInvalidArgument,
        absl::StrCat("--model '", text,
                     "' is not a DLRM preset (dlrm), a DLRM model JSON "
                     "file or a directory holding model.json: ",
                     file.status().message()));
  }
  absl::StatusOr<DlrmSpec> spec = ParseDlrmJson(file->contents);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file->path, ": ", spec.status().message()));
  }
  return spec;
}

bool IsDlrmModelText(const std::string& text, FileSystem* fs) {
  if (DlrmPreset(text).ok()) return true;
  absl::StatusOr<ModelFile> file = ReadModelFile(text, fs);
  return file.ok() && IsDlrmJson(file->contents);
}

absl::StatusOr<ParameterLayout> DlrmParameterLayout(const DlrmSpec& s) {
  RETURN_IF_ERROR(ValidateDlrmSpec(s));
  std::vector<ParameterLayout::TensorDef> defs;
  AppendMlp("bot_l", DlrmBottomSizes(s), &defs);
  AppendMlp("top_l", DlrmTopSizes(s), &defs);
  return ParameterLayout::Create(defs);
}

std::vector<float> DlrmInitialParameters(const DlrmSpec& s,
                                         const ParameterLayout& layout,
                                         uint64_t seed) {
  std::vector<float> params(layout.total_elements(), 0.0f);
  std::mt19937_64 rng(seed);
  const std::vector<int64_t> bottom = DlrmBottomSizes(s);
  const std::vector<int64_t> top = DlrmTopSizes(s);
  const size_t bottom_layers = bottom.size() - 1;
  const size_t layers = bottom_layers + top.size() - 1;
  for (size_t l = 0; l < layers; ++l) {
    const bool in_bottom = l < bottom_layers;
    const std::vector<int64_t>& sizes = in_bottom ? bottom : top;
    const size_t i = in_bottom ? l : l - bottom_layers;
    const double fan_in = static_cast<double>(sizes[i]);
    const double fan_out = static_cast<double>(sizes[i + 1]);
    const double stddev = l + 1 < layers ? std::sqrt(2.0 / fan_in)
                                         : std::sqrt(2.0 / (fan_in + fan_out));
    const TensorSlot& weight = layout.tensors()[2 * l];
    FillNormal(rng, stddev, params.data() + weight.offset, weight.numel);
  }
  return params;
}

}  // namespace ferry

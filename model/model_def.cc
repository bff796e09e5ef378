#include "model/model_def.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/layer_args.h"
#include "model/layer_kinds.h"
#include "model/shape_inference.h"
#include "nlohmann/json.hpp"

namespace ferry {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

absl::StatusOr<LayerDef> ParseLayer(int index, const Json& layer) {
  const std::string at = absl::StrCat("layer ", index);
  if (!layer.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, ": must be an object {\"type\": ..., \"args\": ...}"));
  }
  for (auto it = layer.begin(); it != layer.end(); ++it) {
    if (it.key() != "type" && it.key() != "args") {
      return absl::InvalidArgumentError(
          absl::StrCat(at, ": unknown key '", it.key(), "'"));
    }
  }
  auto type_it = layer.find("type");
  if (type_it == layer.end() || !type_it->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, ": needs a string \"type\""));
  }
  absl::StatusOr<LayerType> type = ParseLayerType(type_it->get<std::string>());
  if (!type.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, ": ", type.status().message()));
  }
  static const Json kEmpty = Json::object();
  auto args_it = layer.find("args");
  const Json& args = args_it == layer.end() ? kEmpty : *args_it;
  const std::string where = absl::StrCat(at, " (", LayerTypeName(*type), ")");
  if (!args.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": \"args\" must be an object"));
  }
  LayerArgReader r(where, args);
  LayerDef d;
  d.type = *type;
  if (type->kind().parse_args != nullptr) {
    RETURN_IF_ERROR(type->kind().parse_args(r, d));
  }
  RETURN_IF_ERROR(r.Finish());
  return d;
}

absl::StatusOr<InputSpec> ParseInput(const Json& input) {
  if (!input.is_object()) {
    return absl::InvalidArgumentError("\"input\" must be an object");
  }
  LayerArgReader r("input", input);
  InputSpec spec;
  auto shape = input.find("shape");
  if (shape == input.end() || !shape->is_array() ||
      (shape->size() != 1 && shape->size() != 3)) {
    return r.Error("\"shape\" must be [C, H, W] or [F]");
  }
  for (const Json& dim : *shape) {
    if (!dim.is_number_integer() || dim.get<int64_t>() <= 0 ||
        dim.get<int64_t>() > (int64_t{1} << 31) - 1) {
      return r.Error(
          absl::StrCat("\"shape\" needs positive integers, got ", dim.dump()));
    }
    spec.shape.push_back(dim.get<int64_t>());
  }
  r.Known("shape");
  const double kHuge = 1e30;
  ASSIGN_OR_RETURN(spec.scale,
                   r.Number("scale", spec.scale, -kHuge, kHuge, false));
  ASSIGN_OR_RETURN(spec.mean,
                   r.Number("mean", spec.mean, -kHuge, kHuge, false));
  ASSIGN_OR_RETURN(spec.std, r.Number("std", spec.std, 1e-30, kHuge, false));
  RETURN_IF_ERROR(r.Finish());
  return spec;
}

OrderedJson LayerArgs(const LayerDef& d) {
  LayerArgWriter w;
  if (d.type.kind().write_args != nullptr) d.type.kind().write_args(d, w);
  return w.args();
}

}  // namespace

absl::StatusOr<ModelDef> ParseModelJson(std::string_view text) {
  Json root;
  try {
    root = Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {  // parse_error, number overflow
    return absl::InvalidArgumentError(
        absl::StrCat("model JSON does not parse: ", e.what()));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError("model JSON must be an object");
  }
  if (auto kind = root.find("kind"); kind != root.end() && *kind == "dlrm") {
    return absl::InvalidArgumentError(
        "model JSON is a DLRM CTR model (\"kind\": \"dlrm\", "
        "model/dlrm_spec.h), not a sequential model");
  }
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& key = it.key();
    if (key != "format" && key != "input" && key != "classes" &&
        key != "layers") {
      return absl::InvalidArgumentError(
          absl::StrCat("model JSON: unknown key '", key, "'"));
    }
  }
  auto format = root.find("format");
  if (format == root.end() || *format != kModelFormatV1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model JSON: \"format\" must be \"", kModelFormatV1, "\", got ",
        format == root.end() ? "nothing" : format->dump()));
  }
  ModelDef def;
  auto input = root.find("input");
  if (input == root.end()) {
    return absl::InvalidArgumentError("model JSON: missing \"input\"");
  }
  ASSIGN_OR_RETURN(def.input, ParseInput(*input));
  auto classes = root.find("classes");
  if (classes == root.end() || !classes->is_number_integer() ||
      classes->get<int64_t>() < 1 ||
      classes->get<int64_t>() > (int64_t{1} << 31) - 1) {
    return absl::InvalidArgumentError(
        "model JSON: \"classes\" must be a positive integer");
  }
  def.classes = classes->get<int64_t>();
  auto layers = root.find("layers");
  if (layers == root.end() || !layers->is_array() || layers->empty()) {
    return absl::InvalidArgumentError(
        "model JSON: \"layers\" must be a non-empty array");
  }
  for (size_t i = 0; i < layers->size(); ++i) {
    ASSIGN_OR_RETURN(LayerDef layer,
                     ParseLayer(static_cast<int>(i), (*layers)[i]));
    def.layers.push_back(layer);
  }
  RETURN_IF_ERROR(ValidateModel(def));
  return def;
}

std::string ModelToJson(const ModelDef& def) {
  OrderedJson root = OrderedJson::object();
  root["format"] = kModelFormatV1;
  OrderedJson input = OrderedJson::object();
  input["shape"] = def.input.shape;
  input["scale"] = def.input.scale;
  input["mean"] = def.input.mean;
  input["std"] = def.input.std;
  root["input"] = input;
  root["classes"] = def.classes;
  OrderedJson layers = OrderedJson::array();
  for (const LayerDef& d : def.layers) {
    OrderedJson layer = OrderedJson::object();
    layer["type"] = LayerTypeName(d.type);
    layer["args"] = LayerArgs(d);
    layers.push_back(layer);
  }
  root["layers"] = layers;
  return root.dump(2) + "\n";
}

}  // namespace ferry

#include "model/model_def.h"

#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "model/shape_inference.h"
#include "nlohmann/json.hpp"

namespace ferry {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

struct TypeName {
  LayerType type;
  const char* name;
};
constexpr TypeName kTypeNames[] = {
    {LayerType::kLinear, "Linear"},
    {LayerType::kConv2d, "Conv2d"},
    {LayerType::kMaxPool2d, "MaxPool2d"},
    {LayerType::kAvgPool2d, "AvgPool2d"},
    {LayerType::kReLU, "ReLU"},
    {LayerType::kDropout, "Dropout"},
    {LayerType::kFlatten, "Flatten"},
    {LayerType::kBatchNorm2d, "BatchNorm2d"},
    {LayerType::kBatchNorm1d, "BatchNorm1d"},
};

// Reads the `args` object of one layer. Every key must be consumed by a Get*
// call or be accepted at its PyTorch default; Finish() refuses the rest.
class ArgReader {
 public:
  ArgReader(std::string where, const Json& args)
      : where_(std::move(where)), args_(args) {}

  absl::Status Error(const std::string& message) const {
    return absl::InvalidArgumentError(absl::StrCat(where_, ": ", message));
  }

  // A positive (or, with allow_zero, non-negative) int; required unless a
  // default is given.
  absl::StatusOr<int64_t> Int(const std::string& key, bool required,
                              int64_t fallback, bool allow_zero = false) {
    used_.insert(key);
    auto it = args_.find(key);
    if (it == args_.end()) {
      if (required) return Error(absl::StrCat("missing argument '", key, "'"));
      return fallback;
    }
    return ToInt(key, *it, allow_zero);
  }

  // An int or an [h, w] pair of ints; `present` tells whether it was given.
  absl::StatusOr<IntPair> Pair(const std::string& key, bool required,
                               IntPair fallback, bool allow_zero,
                               bool* present = nullptr) {
    used_.insert(key);
    auto it = args_.find(key);
    if (present != nullptr) *present = it != args_.end() && !it->is_null();
    if (it == args_.end() || it->is_null()) {
      if (required) return Error(absl::StrCat("missing argument '", key, "'"));
      return fallback;
    }
    if (it->is_array()) {
      if (it->size() != 2) {
        return Error(absl::StrCat("'", key, "' must be an int or [h, w], got ",
                                  it->dump()));
      }
      ASSIGN_OR_RETURN(int64_t h, ToInt(key, (*it)[0], allow_zero));
      ASSIGN_OR_RETURN(int64_t w, ToInt(key, (*it)[1], allow_zero));
      return IntPair{h, w};
    }
    ASSIGN_OR_RETURN(int64_t v, ToInt(key, *it, allow_zero));
    return IntPair{v, v};
  }

  absl::StatusOr<bool> Bool(const std::string& key, bool fallback) {
    used_.insert(key);
    auto it = args_.find(key);
    if (it == args_.end()) return fallback;
    if (!it->is_boolean()) {
      return Error(
          absl::StrCat("'", key, "' must be true or false, got ", it->dump()));
    }
    return it->get<bool>();
  }

  // A finite number in [lo, hi] (hi exclusive when hi_open).
  absl::StatusOr<double> Number(const std::string& key, double fallback,
                                double lo, double hi, bool hi_open) {
    used_.insert(key);
    auto it = args_.find(key);
    if (it == args_.end()) return fallback;
    if (!it->is_number()) {
      return Error(
          absl::StrCat("'", key, "' must be a number, got ", it->dump()));
    }
    const double v = it->get<double>();
    if (!std::isfinite(v) || v < lo || v > hi || (hi_open && v == hi)) {
      return Error(absl::StrCat("'", key, "' is ", it->dump(), ", outside [",
                                lo, ", ", hi, hi_open ? ")" : "]"));
    }
    return v;
  }

  // Accepts `key` only when it holds `expected` (PyTorch's default, the only
  // behaviour ferry implements).
  absl::Status OnlyDefault(const std::string& key, const Json& expected) {
    used_.insert(key);
    auto it = args_.find(key);
    if (it == args_.end() || *it == expected) return absl::OkStatus();
    return Error(absl::StrCat("'", key, "' = ", it->dump(),
                              " is not supported (only ", expected.dump(),
                              ")"));
  }
  // Marks `key` as read by the caller.
  void Known(const std::string& key) { used_.insert(key); }
  // Accepts `key` with any boolean value (e.g. inplace).
  absl::Status Ignored(const std::string& key) {
    return Bool(key, false).status();
  }

  absl::Status Finish() const {
    for (auto it = args_.begin(); it != args_.end(); ++it) {
      if (!used_.contains(it.key())) {
        return Error(absl::StrCat("unknown argument '", it.key(), "'"));
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::StatusOr<int64_t> ToInt(const std::string& key, const Json& v,
                                bool allow_zero) const {
    if (!v.is_number_integer()) {
      return Error(
          absl::StrCat("'", key, "' must be an integer, got ", v.dump()));
    }
    const int64_t i = v.get<int64_t>();
    if (i < 0 || (i == 0 && !allow_zero) || i > (int64_t{1} << 31) - 1) {
      return Error(absl::StrCat("'", key, "' is ", i, ", must be ",
                                allow_zero ? ">= 0" : "> 0"));
    }
    return i;
  }

  std::string where_;
  const Json& args_;
  std::set<std::string> used_;
};

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
  ArgReader r(where, args);
  LayerDef d;
  d.type = *type;
  switch (*type) {
    case LayerType::kLinear: {
      ASSIGN_OR_RETURN(d.in_features, r.Int("in_features", true, 0));
      ASSIGN_OR_RETURN(d.out_features, r.Int("out_features", true, 0));
      ASSIGN_OR_RETURN(d.bias, r.Bool("bias", true));
      break;
    }
    case LayerType::kConv2d: {
      ASSIGN_OR_RETURN(d.in_channels, r.Int("in_channels", true, 0));
      ASSIGN_OR_RETURN(d.out_channels, r.Int("out_channels", true, 0));
      ASSIGN_OR_RETURN(d.kernel_size, r.Pair("kernel_size", true, {}, false));
      ASSIGN_OR_RETURN(d.stride, r.Pair("stride", false, {1, 1}, false));
      ASSIGN_OR_RETURN(d.padding, r.Pair("padding", false, {0, 0}, true));
      ASSIGN_OR_RETURN(d.bias, r.Bool("bias", true));
      RETURN_IF_ERROR(r.OnlyDefault("dilation", 1));
      RETURN_IF_ERROR(r.OnlyDefault("groups", 1));
      RETURN_IF_ERROR(r.OnlyDefault("padding_mode", "zeros"));
      break;
    }
    case LayerType::kMaxPool2d:
    case LayerType::kAvgPool2d: {
      ASSIGN_OR_RETURN(d.kernel_size, r.Pair("kernel_size", true, {}, false));
      ASSIGN_OR_RETURN(d.stride, r.Pair("stride", false, d.kernel_size, false));
      ASSIGN_OR_RETURN(d.padding, r.Pair("padding", false, {0, 0}, true));
      RETURN_IF_ERROR(r.OnlyDefault("ceil_mode", false));
      if (*type == LayerType::kMaxPool2d) {
        RETURN_IF_ERROR(r.OnlyDefault("dilation", 1));
        RETURN_IF_ERROR(r.OnlyDefault("return_indices", false));
      } else {
        RETURN_IF_ERROR(r.OnlyDefault("count_include_pad", true));
        RETURN_IF_ERROR(r.OnlyDefault("divisor_override", nullptr));
      }
      if (2 * d.padding.h > d.kernel_size.h ||
          2 * d.padding.w > d.kernel_size.w) {
        return r.Error("padding must be at most half the kernel size");
      }
      break;
    }
    case LayerType::kReLU: {
      RETURN_IF_ERROR(r.Ignored("inplace"));
      break;
    }
    case LayerType::kDropout: {
      ASSIGN_OR_RETURN(d.p, r.Number("p", 0.5, 0.0, 1.0, true));
      RETURN_IF_ERROR(r.Ignored("inplace"));
      break;
    }
    case LayerType::kFlatten: {
      RETURN_IF_ERROR(r.OnlyDefault("start_dim", 1));
      RETURN_IF_ERROR(r.OnlyDefault("end_dim", -1));
      break;
    }
    case LayerType::kBatchNorm2d:
    case LayerType::kBatchNorm1d: {
      ASSIGN_OR_RETURN(d.num_features, r.Int("num_features", true, 0));
      ASSIGN_OR_RETURN(d.eps, r.Number("eps", 1e-5, 1e-30, 1.0, false));
      ASSIGN_OR_RETURN(d.momentum, r.Number("momentum", 0.1, 0.0, 1.0, false));
      RETURN_IF_ERROR(r.OnlyDefault("affine", true));
      RETURN_IF_ERROR(r.OnlyDefault("track_running_stats", true));
      break;
    }
  }
  RETURN_IF_ERROR(r.Finish());
  return d;
}

absl::StatusOr<InputSpec> ParseInput(const Json& input) {
  if (!input.is_object()) {
    return absl::InvalidArgumentError("\"input\" must be an object");
  }
  ArgReader r("input", input);
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

OrderedJson PairJson(const IntPair& p) {
  if (p.h == p.w) return p.h;
  return OrderedJson::array({p.h, p.w});
}

OrderedJson LayerArgs(const LayerDef& d) {
  OrderedJson a = OrderedJson::object();
  switch (d.type) {
    case LayerType::kLinear:
      a["in_features"] = d.in_features;
      a["out_features"] = d.out_features;
      a["bias"] = d.bias;
      break;
    case LayerType::kConv2d:
      a["in_channels"] = d.in_channels;
      a["out_channels"] = d.out_channels;
      a["kernel_size"] = PairJson(d.kernel_size);
      a["stride"] = PairJson(d.stride);
      a["padding"] = PairJson(d.padding);
      a["bias"] = d.bias;
      break;
    case LayerType::kMaxPool2d:
    case LayerType::kAvgPool2d:
      a["kernel_size"] = PairJson(d.kernel_size);
      a["stride"] = PairJson(d.stride);
      a["padding"] = PairJson(d.padding);
      break;
    case LayerType::kDropout:
      a["p"] = d.p;
      break;
    case LayerType::kBatchNorm2d:
    case LayerType::kBatchNorm1d:
      a["num_features"] = d.num_features;
      a["eps"] = d.eps;
      a["momentum"] = d.momentum;
      break;
    case LayerType::kReLU:
    case LayerType::kFlatten:
      break;
  }
  return a;
}

}  // namespace

const char* LayerTypeName(LayerType type) {
  for (const TypeName& t : kTypeNames) {
    if (t.type == type) return t.name;
  }
  return "?";
}

absl::StatusOr<LayerType> ParseLayerType(std::string_view name) {
  std::vector<std::string> known;
  for (const TypeName& t : kTypeNames) {
    if (name == t.name) return t.type;
    known.push_back(t.name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown layer type '", std::string(name),
                   "' (supported: ", absl::StrJoin(known, ", "), ")"));
}

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

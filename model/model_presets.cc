#include "model/model_presets.h"

#include <cctype>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/model_file.h"
#include "model/model_spec.h"
#include "model/shape_inference.h"

namespace ferry {
namespace {

InputSpec PresetInput(std::vector<int64_t> shape) {
  InputSpec in;
  in.shape = std::move(shape);
  in.scale = 1.0 / 255.0;
  in.mean = kPresetInputMean;
  in.std = kPresetInputStd;
  return in;
}

LayerDef Linear(int64_t in, int64_t out) {
  LayerDef d;
  d.type = LayerType::kLinear;
  d.in_features = in;
  d.out_features = out;
  return d;
}

LayerDef Conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  LayerDef d;
  d.type = LayerType::kConv2d;
  d.in_channels = in;
  d.out_channels = out;
  d.kernel_size = {kernel, kernel};
  d.stride = {stride, stride};
  return d;
}

LayerDef Simple(LayerType type) {
  LayerDef d;
  d.type = type;
  return d;
}

LayerDef Dropout(double p) {
  LayerDef d = Simple(LayerType::kDropout);
  d.p = p;
  return d;
}

LayerDef MaxPool(int64_t kernel) {
  LayerDef d = Simple(LayerType::kMaxPool2d);
  d.kernel_size = {kernel, kernel};
  d.stride = {kernel, kernel};
  return d;
}

// Digits separated by dashes, like 784-256-128-10.
bool LooksLikeMlpString(const std::string& text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '-') return false;
  }
  return true;
}

// Dash-separated words that are not a path ("784-abc-10"): meant as an MLP.
bool MeantAsMlpString(const std::string& text) {
  return text.find('-') != std::string::npos &&
         text.find('/') == std::string::npos &&
         text.find('.') == std::string::npos;
}

}  // namespace

ModelDef MlpModelDef(const std::vector<int>& sizes) {
  ModelDef def;
  def.input = PresetInput({sizes.front()});
  def.classes = sizes.back();
  for (size_t l = 0; l + 1 < sizes.size(); ++l) {
    def.layers.push_back(Linear(sizes[l], sizes[l + 1]));
    if (l + 2 < sizes.size()) def.layers.push_back(Simple(LayerType::kReLU));
  }
  return def;
}

ModelDef ConvNetModelDef() {
  ModelDef def;
  def.input = PresetInput({1, 28, 28});
  def.classes = 10;
  def.layers = {Conv(1, 32, 3, 1),
                Simple(LayerType::kReLU),
                Conv(32, 64, 3, 1),
                Simple(LayerType::kReLU),
                MaxPool(2),
                Dropout(0.25),
                Simple(LayerType::kFlatten),
                Linear(9216, 128),
                Simple(LayerType::kReLU),
                Dropout(0.5),
                Linear(128, 10)};
  return def;
}

std::vector<std::string> ModelPresetNames() { return {"mlp", "convnet"}; }

absl::StatusOr<ModelDef> ResolveModelSpec(const std::string& text,
                                          FileSystem* fs) {
  if (text == "mlp") return MlpModelDef({784, 256, 128, 10});
  if (text == "convnet") return ConvNetModelDef();
  if (text == "dlrm") {
    return absl::InvalidArgumentError(
        "--model 'dlrm' is a DLRM CTR model (model/dlrm_spec.h: "
        "ResolveDlrmSpec), not a sequential model");
  }
  if (LooksLikeMlpString(text)) {
    ASSIGN_OR_RETURN(std::vector<int> sizes, ParseMlpSpec(text));
    ModelDef def = MlpModelDef(sizes);
    RETURN_IF_ERROR(ValidateModel(def));
    return def;
  }
  absl::StatusOr<ModelFile> file = ReadModelFile(text, fs);
  if (!file.ok()) {
    if (absl::IsNotFound(file.status()) && MeantAsMlpString(text)) {
      // Says what is wrong with it.
      if (absl::Status bad = ParseMlpSpec(text).status(); !bad.ok()) {
        return bad;
      }
    }
    return absl::Status(
        absl::IsNotFound(file.status()) ? absl::StatusCode::kNotFound
                                        : absl::StatusCode::kInvalidArgument,
        absl::StrCat("--model '", text,
                     "' is not a preset (mlp, convnet), an MLP like "
                     "784-256-128-10, a model JSON file or a directory "
                     "holding model.json: ",
                     file.status().message()));
  }
  absl::StatusOr<ModelDef> def = ParseModelJson(file->contents);
  if (!def.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file->path, ": ", def.status().message()));
  }
  return def;
}

}  // namespace ferry

#include "model/model_params.h"

#include <cmath>
#include <initializer_list>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/normal_init.h"
#include "model/shape_inference.h"

namespace ferry {
namespace {

bool IsBatchNorm(LayerType t) {
  return t == LayerType::kBatchNorm1d || t == LayerType::kBatchNorm2d;
}

// Whether the activation after layer i is a ReLU (looking through layers that
// do not change the kind of nonlinearity).
bool FollowedByRelu(const ModelDef& def, size_t i) {
  for (size_t j = i + 1; j < def.layers.size(); ++j) {
    switch (def.layers[j].type) {
      case LayerType::kReLU:
        return true;
      case LayerType::kDropout:
      case LayerType::kBatchNorm1d:
      case LayerType::kBatchNorm2d:
      case LayerType::kMaxPool2d:
      case LayerType::kAvgPool2d:
      case LayerType::kFlatten:
        continue;
      default:
        return false;
    }
  }
  return false;
}

using LayerTensorDefs =
    std::vector<ParameterLayout::TensorDef> (*)(const LayerDef&);

// The tensors every `defs` gives, in order, each over all layers, named
// "<layer index>.<name>".
absl::StatusOr<ParameterLayout> Prefixed(
    const ModelDef& def, std::initializer_list<LayerTensorDefs> defs) {
  RETURN_IF_ERROR(ValidateModel(def));
  std::vector<ParameterLayout::TensorDef> all;
  for (LayerTensorDefs of_layer : defs) {
    for (size_t i = 0; i < def.layers.size(); ++i) {
      for (ParameterLayout::TensorDef t : of_layer(def.layers[i])) {
        t.name = absl::StrCat(i, ".", t.name);
        all.push_back(std::move(t));
      }
    }
  }
  return ParameterLayout::Create(all);
}

}  // namespace

std::vector<ParameterLayout::TensorDef> LayerParamDefs(const LayerDef& d) {
  std::vector<ParameterLayout::TensorDef> defs;
  switch (d.type) {
    case LayerType::kLinear:
      defs.push_back({"weight", {d.out_features, d.in_features}});
      if (d.bias) defs.push_back({"bias", {d.out_features}});
      break;
    case LayerType::kConv2d:
      defs.push_back(
          {"weight",
           {d.out_channels, d.in_channels, d.kernel_size.h, d.kernel_size.w}});
      if (d.bias) defs.push_back({"bias", {d.out_channels}});
      break;
    case LayerType::kBatchNorm1d:
    case LayerType::kBatchNorm2d:
      defs.push_back({"weight", {d.num_features}});
      defs.push_back({"bias", {d.num_features}});
      break;
    default:
      break;
  }
  return defs;
}

std::vector<ParameterLayout::TensorDef> LayerStateDefs(const LayerDef& d) {
  if (!IsBatchNorm(d.type)) return {};
  return {{"running_mean", {d.num_features}},
          {"running_var", {d.num_features}},
          {"num_batches_tracked", {}}};
}

absl::StatusOr<ParameterLayout> ModelParameterLayout(const ModelDef& def) {
  return Prefixed(def, {&LayerParamDefs});
}

absl::StatusOr<ParameterLayout> ModelStateLayout(const ModelDef& def) {
  return Prefixed(def, {&LayerStateDefs});
}

absl::StatusOr<ParameterLayout> ModelJobLayout(const ModelDef& def) {
  return Prefixed(def, {&LayerParamDefs, &LayerStateDefs});
}

std::vector<float> ModelInitialParameters(const ModelDef& def,
                                          const ParameterLayout& layout,
                                          uint64_t seed) {
  std::vector<float> params(layout.total_elements(), 0.0f);
  std::mt19937_64 rng(seed);
  size_t tensor = 0;
  for (size_t i = 0; i < def.layers.size(); ++i) {
    const LayerDef& d = def.layers[i];
    const size_t count = LayerParamDefs(d).size();
    if (count == 0) continue;
    const TensorSlot& weight = layout.tensors()[tensor];
    if (IsBatchNorm(d.type)) {
      std::fill_n(params.begin() + weight.offset, weight.numel, 1.0f);
    } else {
      const int64_t window =
          d.type == LayerType::kConv2d ? d.kernel_size.h * d.kernel_size.w : 1;
      const int64_t fan_in =
          (d.type == LayerType::kConv2d ? d.in_channels : d.in_features) *
          window;
      const int64_t fan_out =
          (d.type == LayerType::kConv2d ? d.out_channels : d.out_features) *
          window;
      const double stddev =
          FollowedByRelu(def, i)
              ? std::sqrt(2.0 / static_cast<double>(fan_in))
              : std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
      FillNormal(rng, stddev, params.data() + weight.offset, weight.numel);
    }
    tensor += count;
  }
  return params;
}

std::vector<float> ModelInitialState(const ModelDef& def,
                                     const ParameterLayout& layout) {
  std::vector<float> state(layout.total_elements(), 0.0f);
  size_t tensor = 0;
  for (const LayerDef& d : def.layers) {
    if (!IsBatchNorm(d.type)) continue;
    const TensorSlot& var = layout.tensors()[tensor + 1];
    std::fill_n(state.begin() + var.offset, var.numel, 1.0f);
    tensor += 3;
  }
  return state;
}

absl::StatusOr<std::vector<float>> ModelJobInitialValues(const ModelDef& def,
                                                         uint64_t seed) {
  ASSIGN_OR_RETURN(const ParameterLayout params, ModelParameterLayout(def));
  ASSIGN_OR_RETURN(const ParameterLayout state, ModelStateLayout(def));
  std::vector<float> values = ModelInitialParameters(def, params, seed);
  const std::vector<float> initial_state = ModelInitialState(def, state);
  values.insert(values.end(), initial_state.begin(), initial_state.end());
  return values;
}

}  // namespace ferry

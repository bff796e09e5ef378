#include "model/model_params.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/layer_kinds.h"
#include "model/normal_init.h"
#include "model/shape_inference.h"

namespace ferry {
namespace {

// Whether the activation after layer i is a ReLU (looking through layers that
// do not change the kind of nonlinearity).
bool FollowedByRelu(const ModelDef& def, size_t i) {
  for (size_t j = i + 1; j < def.layers.size(); ++j) {
    switch (def.layers[j].type.kind().activation) {
      case ActivationRole::kRelu:
        return true;
      case ActivationRole::kTransparent:
        continue;
      case ActivationRole::kOther:
        return false;
    }
  }
  return false;
}

std::vector<LayerTensor> ParamTensors(const LayerDef& d) {
  if (d.type.kind().params == nullptr) return {};
  return d.type.kind().params(d);
}

std::vector<LayerTensor> StateTensors(const LayerDef& d) {
  if (d.type.kind().state == nullptr) return {};
  return d.type.kind().state(d);
}

std::vector<ParameterLayout::TensorDef> Defs(
    const std::vector<LayerTensor>& tensors) {
  std::vector<ParameterLayout::TensorDef> defs;
  defs.reserve(tensors.size());
  for (const LayerTensor& t : tensors) defs.push_back(t.def);
  return defs;
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
  return Defs(ParamTensors(d));
}

std::vector<ParameterLayout::TensorDef> LayerStateDefs(const LayerDef& d) {
  return Defs(StateTensors(d));
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

namespace {

// FillNormal's draws of `n` values of `stddev` at flat offset `at`, kept
// where they fall in [begin, end) (written to out[flat - begin]); whole
// blocks outside are skipped by discarding their draws. Blocks hold an
// even count, so the draws pair up as in one FillNormal call.
void FillNormalRange(std::mt19937_64& rng, double stddev, int64_t at, int64_t n,
                     int64_t begin, int64_t end, float* out) {
  constexpr int64_t kBlock = 1 << 16;
  std::vector<float> block;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t len = std::min(kBlock, n - b);
    const int64_t lo = std::max(at + b, begin),
                  hi = std::min(at + b + len, end);
    if (lo >= hi) {
      rng.discard(static_cast<uint64_t>(2 * ((len + 1) / 2)));
    } else if (lo == at + b && hi == at + b + len) {
      FillNormal(rng, stddev, out + (lo - begin), len);
    } else {
      block.resize(static_cast<size_t>(len));
      FillNormal(rng, stddev, block.data(), len);
      std::copy(block.begin() + (lo - at - b), block.begin() + (hi - at - b),
                out + (lo - begin));
    }
  }
}

// ModelInitialParameters' elements [begin, end) into out[0, end - begin)
// (zeros first).
void FillInitialParameters(const ModelDef& def, const ParameterLayout& layout,
                           uint64_t seed, int64_t begin, int64_t end,
                           float* out) {
  std::fill(out, out + (end - begin), 0.0f);
  std::mt19937_64 rng(seed);
  size_t tensor = 0;
  for (size_t i = 0; i < def.layers.size(); ++i) {
    for (const LayerTensor& t : ParamTensors(def.layers[i])) {
      const TensorSlot& slot = layout.tensors()[tensor++];
      if (t.init == TensorInit::kOnes) {
        const int64_t lo = std::max(slot.offset, begin);
        const int64_t hi = std::min(slot.offset + slot.numel, end);
        if (lo < hi) std::fill(out + (lo - begin), out + (hi - begin), 1.0f);
      } else if (t.init == TensorInit::kFanNormal) {
        const double stddev =
            FollowedByRelu(def, i)
                ? std::sqrt(2.0 / static_cast<double>(t.fan_in))
                : std::sqrt(2.0 / static_cast<double>(t.fan_in + t.fan_out));
        FillNormalRange(rng, stddev, slot.offset, slot.numel, begin, end, out);
      }
    }
  }
}

}  // namespace

std::vector<float> ModelInitialParameters(const ModelDef& def,
                                          const ParameterLayout& layout,
                                          uint64_t seed) {
  std::vector<float> params(layout.total_elements());
  FillInitialParameters(def, layout, seed, 0, layout.total_elements(),
                        params.data());
  return params;
}

std::vector<float> ModelInitialState(const ModelDef& def,
                                     const ParameterLayout& layout) {
  std::vector<float> state(layout.total_elements(), 0.0f);
  size_t tensor = 0;
  for (const LayerDef& d : def.layers) {
    for (const LayerTensor& t : StateTensors(d)) {
      const TensorSlot& slot = layout.tensors()[tensor++];
      if (t.init == TensorInit::kOnes) {
        std::fill_n(state.begin() + slot.offset, slot.numel, 1.0f);
      }
    }
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

absl::Status FillModelJobInitialValues(const ModelDef& def, uint64_t seed,
                                       absl::Span<float> out) {
  ASSIGN_OR_RETURN(const ParameterLayout params, ModelParameterLayout(def));
  ASSIGN_OR_RETURN(const ParameterLayout state, ModelStateLayout(def));
  const int64_t p = params.total_elements();
  if (static_cast<int64_t>(out.size()) != p + state.total_elements()) {
    return absl::InvalidArgumentError(
        absl::StrCat("initial values: a buffer of ", out.size(),
                     " elements for the model's ", p + state.total_elements()));
  }
  FillInitialParameters(def, params, seed, 0, p, out.data());
  const std::vector<float> initial_state = ModelInitialState(def, state);
  std::copy(initial_state.begin(), initial_state.end(), out.begin() + p);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> ModelJobInitialSlice(const ModelDef& def,
                                                        uint64_t seed,
                                                        int64_t begin,
                                                        int64_t end) {
  ASSIGN_OR_RETURN(const ParameterLayout params, ModelParameterLayout(def));
  ASSIGN_OR_RETURN(const ParameterLayout state, ModelStateLayout(def));
  const int64_t p = params.total_elements();
  if (begin < 0 || begin > end || end > p + state.total_elements()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "initial slice [", begin, ", ", end, ") is outside the model's ",
        p + state.total_elements(), " values"));
  }
  std::vector<float> values(static_cast<size_t>(end - begin));
  if (begin < p) {
    FillInitialParameters(def, params, seed, begin, std::min(end, p),
                          values.data());
  }
  if (end > p) {
    const std::vector<float> initial_state = ModelInitialState(def, state);
    const int64_t from = std::max(begin, p);
    std::copy(initial_state.begin() + (from - p),
              initial_state.begin() + (end - p),
              values.begin() + (from - begin));
  }
  return values;
}

}  // namespace ferry

#include "model/model_spec.h"

#include <cmath>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "model/normal_init.h"

namespace ferry {

absl::StatusOr<std::vector<int>> ParseMlpSpec(const std::string& spec) {
  std::vector<int> sizes;
  for (absl::string_view part : absl::StrSplit(spec, '-')) {
    int size = 0;
    if (!absl::SimpleAtoi(part, &size) || size <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model spec '", spec, "': '", part,
          "' is not a positive layer size (expected e.g. 784-256-128-10)"));
    }
    sizes.push_back(size);
  }
  if (sizes.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model spec '", spec, "' needs at least an input and an output size"));
  }
  return sizes;
}

std::string MlpSpecString(const std::vector<int>& sizes) {
  return absl::StrJoin(sizes, "-");
}

absl::StatusOr<ParameterLayout> MlpLayout(const std::vector<int>& sizes) {
  if (sizes.size() < 2) {
    return absl::InvalidArgumentError("an MLP needs at least two layer sizes");
  }
  std::vector<ParameterLayout::TensorDef> defs;
  for (size_t l = 0; l + 1 < sizes.size(); ++l) {
    if (sizes[l] <= 0 || sizes[l + 1] <= 0) {
      return absl::InvalidArgumentError("MLP layer sizes must be positive");
    }
    defs.push_back(
        {absl::StrCat("fc", l, ".weight"), {sizes[l + 1], sizes[l]}});
    defs.push_back({absl::StrCat("fc", l, ".bias"), {sizes[l + 1]}});
  }
  return ParameterLayout::Create(defs);
}

std::vector<float> MlpInitialParameters(const std::vector<int>& sizes,
                                        const ParameterLayout& layout,
                                        uint64_t seed) {
  const int num_layers = static_cast<int>(sizes.size()) - 1;
  std::vector<float> params(layout.total_elements(), 0.0f);
  std::mt19937_64 rng(seed);
  for (int l = 0; l < num_layers; ++l) {
    const TensorSlot& weight = layout.tensors()[2 * l];
    const int fan_in = sizes[l];
    const int fan_out = sizes[l + 1];
    const bool last = l + 1 == num_layers;
    const double stddev =
        last ? std::sqrt(2.0 / (fan_in + fan_out)) : std::sqrt(2.0 / fan_in);
    FillNormal(rng, stddev, params.data() + weight.offset, weight.numel);
  }
  return params;
}

}  // namespace ferry

#include "model/pipeline_split.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "model/layer_kinds.h"
#include "model/model_params.h"

namespace ferry {
namespace {

// The cost of a split so far: its largest stage, then its boundary traffic.
struct SplitCost {
  double max_stage = std::numeric_limits<double>::infinity();
  double boundary = 0.0;
  int previous_start = -1;  // the start of the split's last stage
  bool operator<(const SplitCost& o) const {
    return std::pair(max_stage, boundary) < std::pair(o.max_stage, o.boundary);
  }
};

}  // namespace

absl::StatusOr<StageBalance> ParseStageBalance(absl::string_view text) {
  if (text == "compute") return StageBalance::kCompute;
  if (text == "params") return StageBalance::kParams;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown stage balance \"", text, "\" (use compute or params)"));
}

const char* StageBalanceName(StageBalance balance) {
  return balance == StageBalance::kCompute ? "compute" : "params";
}

double LayerForwardFlops(const LayerDef& d, const SampleShape& out) {
  if (d.type.kind().forward_flops == nullptr) return 0.0;
  return d.type.kind().forward_flops(d, out);
}

double LayerTrainingFlops(const LayerDef& d, const SampleShape& out) {
  const double forward = LayerForwardFlops(d, out);
  return forward > 0 ? 3.0 * forward
                     : 3.0 * static_cast<double>(ShapeElements(out));
}

absl::StatusOr<std::vector<double>> LayerCosts(const ModelDef& def,
                                               StageBalance balance) {
  ASSIGN_OR_RETURN(std::vector<SampleShape> shapes, InferShapes(def));
  std::vector<double> costs;
  for (size_t i = 0; i < def.layers.size(); ++i) {
    if (balance == StageBalance::kCompute) {
      costs.push_back(LayerTrainingFlops(def.layers[i], shapes[i]));
      continue;
    }
    double bytes = 0.0;
    for (const ParameterLayout::TensorDef& t : LayerParamDefs(def.layers[i])) {
      double numel = 1.0;
      for (int64_t dim : t.shape) numel *= static_cast<double>(dim);
      bytes += 4.0 * numel;
    }
    costs.push_back(bytes);
  }
  return costs;
}

std::vector<bool> StageStartAllowed(const ModelDef& def) {
  std::vector<bool> allowed;
  bool parameters_before = false;  // so that stage 0 has some too
  for (size_t i = 0; i < def.layers.size(); ++i) {
    const bool has = !LayerParamDefs(def.layers[i]).empty();
    allowed.push_back(i == 0 || (has && parameters_before));
    parameters_before = parameters_before || has;
  }
  return allowed;
}

absl::StatusOr<std::vector<StageRange>> StagesFromStarts(
    const std::vector<bool>& allowed, absl::Span<const int> starts) {
  const int n = static_cast<int>(allowed.size());
  std::vector<StageRange> stages;
  int first = 0;
  for (int s : starts) {
    if (s <= first || s >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("pipeline split: stage start ", s,
                       " must be above the previous start (", first,
                       ") and below the layer count (", n, ")"));
    }
    if (!allowed[s]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pipeline split: a stage cannot start at layer ", s,
          ", which has no parameters or leaves none to stage 0 (a stage "
          "starts at a Linear, Conv2d or BatchNorm layer, and every stage "
          "holds one)"));
    }
    stages.push_back({first, s});
    first = s;
  }
  if (n == 0) {
    return absl::InvalidArgumentError(
        "pipeline split: the model has no layers");
  }
  stages.push_back({first, n});
  return stages;
}

absl::StatusOr<std::vector<StageRange>> BalanceStages(
    absl::Span<const double> costs, const std::vector<bool>& allowed,
    int stages, absl::Span<const double> boundary_elements) {
  const int n = static_cast<int>(allowed.size());
  if (static_cast<int>(costs.size()) != n ||
      (!boundary_elements.empty() &&
       static_cast<int>(boundary_elements.size()) != n)) {
    return absl::InvalidArgumentError(
        "pipeline split: one cost per layer is required");
  }
  std::vector<int> cuts;  // positions a stage may start at, then n
  for (int i = 0; i < n; ++i) {
    if (i == 0 || allowed[i]) cuts.push_back(i);
  }
  if (stages < 1 || n == 0 || stages > static_cast<int>(cuts.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline split: cannot cut a model with ", cuts.size(),
                     " layers with parameters into ", stages,
                     " stages (each stage needs one)"));
  }
  cuts.push_back(n);
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + costs[i];
  const int c = static_cast<int>(cuts.size());
  // best[k][b]: the best split of layers [0, cuts[b]) into k + 1 stages.
  std::vector<std::vector<SplitCost>> best(stages, std::vector<SplitCost>(c));
  for (int b = 1; b < c; ++b) {
    best[0][b] = {prefix[cuts[b]], 0.0, 0};
  }
  for (int k = 1; k < stages; ++k) {
    for (int b = k + 1; b < c; ++b) {
      for (int a = k; a < b; ++a) {
        const SplitCost& before = best[k - 1][a];
        if (before.previous_start < 0) continue;
        SplitCost candidate{
            std::max(before.max_stage, prefix[cuts[b]] - prefix[cuts[a]]),
            before.boundary +
                (boundary_elements.empty() ? 0.0 : boundary_elements[cuts[a]]),
            a};
        if (candidate < best[k][b]) best[k][b] = candidate;
      }
    }
  }
  std::vector<StageRange> result(stages);
  int b = c - 1;
  for (int k = stages - 1; k >= 0; --k) {
    const int a = best[k][b].previous_start;
    result[k] = {cuts[a], cuts[b]};
    b = a;
  }
  return result;
}

absl::StatusOr<std::vector<StageRange>> SplitModel(const ModelDef& def,
                                                   int stages,
                                                   absl::Span<const int> starts,
                                                   StageBalance balance) {
  ASSIGN_OR_RETURN(std::vector<double> costs, LayerCosts(def, balance));
  const std::vector<bool> allowed = StageStartAllowed(def);
  if (!starts.empty()) {
    if (static_cast<int>(starts.size()) != stages - 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("pipeline split: ", stages, " stages need ", stages - 1,
                       " stage starts, got ", starts.size()));
    }
    return StagesFromStarts(allowed, starts);
  }
  ASSIGN_OR_RETURN(std::vector<SampleShape> shapes, InferShapes(def));
  std::vector<double> boundary(def.layers.size(), 0.0);
  for (size_t i = 1; i < def.layers.size(); ++i) {
    boundary[i] = static_cast<double>(ShapeElements(shapes[i - 1]));
  }
  return BalanceStages(costs, allowed, stages, boundary);
}

absl::StatusOr<std::vector<int>> ParseStageStarts(absl::string_view text) {
  std::vector<int> starts;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int value = 0;
    if (!absl::SimpleAtoi(part, &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("pipeline split: \"", part,
                       "\" is not a layer index (expected e.g. 3,7)"));
    }
    starts.push_back(value);
  }
  return starts;
}

std::string StageRangesString(absl::Span<const StageRange> stages) {
  return absl::StrJoin(stages, ",", [](std::string* out, const StageRange& s) {
    absl::StrAppend(out, s.first_layer, "-", s.end_layer - 1);
  });
}

}  // namespace ferry

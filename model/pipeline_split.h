// Where a model is cut into pipeline stages: contiguous layer ranges, one per
// stage, from explicit boundaries or balanced by a per-layer cost. Pure.
//
// A stage boundary may only fall just before a layer with parameters (Linear,
// Conv2d, BatchNorm), so that activations, pooling, dropout and Flatten stay
// with the layer they follow and every stage has parameters to train: a model
// can be split into at most as many stages as it has layers with parameters.
#ifndef FERRY_MODEL_PIPELINE_SPLIT_H_
#define FERRY_MODEL_PIPELINE_SPLIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "model/model_def.h"
#include "model/shape_inference.h"

namespace ferry {

// Layers [first_layer, end_layer) of a model.
struct StageRange {
  int first_layer = 0;
  int end_layer = 0;
  bool operator==(const StageRange&) const = default;
};

// What a balanced split evens out across stages.
enum class StageBalance {
  kCompute,  // estimated training FLOPs per sample (LayerTrainingFlops)
  kParams,   // parameter bytes
};
// "compute" or "params"; INVALID_ARGUMENT naming both otherwise.
absl::StatusOr<StageBalance> ParseStageBalance(absl::string_view text);
const char* StageBalanceName(StageBalance balance);

// Multiply-adds x 2 of one sample's forward pass through `layer` with
// per-sample output shape `out`: its GEMM for Linear and Conv2d, 0 for the
// rest.
double LayerForwardFlops(const LayerDef& layer, const SampleShape& out);

// Estimated multiply-adds x 2 of one sample's forward and backward pass
// through `layer` with per-sample output shape `out` (Linear, Conv2d: 3x the
// forward GEMM, the input gradient included; every other layer: 3 per output
// element).
double LayerTrainingFlops(const LayerDef& layer, const SampleShape& out);

// The cost of every layer of `def` under `balance`. INVALID_ARGUMENT for an
// invalid def.
absl::StatusOr<std::vector<double>> LayerCosts(const ModelDef& def,
                                               StageBalance balance);

// Whether a stage may start at layer i: i == 0, or layer i has parameters
// and so does a layer before it (every stage, the first too, holds some).
std::vector<bool> StageStartAllowed(const ModelDef& def);

// The split of `num_layers` layers whose stages 1..P-1 start at `starts`
// (strictly increasing, each in (0, num_layers) and allowed by `allowed`).
// INVALID_ARGUMENT naming the offending boundary otherwise.
absl::StatusOr<std::vector<StageRange>> StagesFromStarts(
    const std::vector<bool>& allowed, absl::Span<const int> starts);

// The split into `stages` stages that minimises the largest stage cost
// (sum of its layers' costs); among those, the smallest total of
// `boundary_elements` at the cuts (boundary_elements[i]: the activation
// elements a cut just before layer i sends, may be empty), then the earliest
// cuts. INVALID_ARGUMENT when stages < 1 or more stages than allowed starts,
// or when the spans' sizes differ from allowed.size().
absl::StatusOr<std::vector<StageRange>> BalanceStages(
    absl::Span<const double> costs, const std::vector<bool>& allowed,
    int stages, absl::Span<const double> boundary_elements = {});

// The split of `def` into `stages` stages: at `starts` when given (a
// "--pipeline-split" list), else balanced by `balance`, with the activation
// elements per sample at each cut as the tie-breaker.
absl::StatusOr<std::vector<StageRange>> SplitModel(const ModelDef& def,
                                                   int stages,
                                                   absl::Span<const int> starts,
                                                   StageBalance balance);

// "3,7" -> {3, 7}; INVALID_ARGUMENT naming the bad entry.
absl::StatusOr<std::vector<int>> ParseStageStarts(absl::string_view text);

// "0-3,4-8" (inclusive layer indices), for logs and the summary.
std::string StageRangesString(absl::Span<const StageRange> stages);

}  // namespace ferry

#endif  // FERRY_MODEL_PIPELINE_SPLIT_H_

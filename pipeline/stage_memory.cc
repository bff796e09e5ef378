#include "pipeline/stage_memory.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "model/layer_stack.h"
#include "model/model_params.h"
#include "model/shape_inference.h"

namespace ferry {
namespace {

std::string MiB(int64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

}  // namespace

absl::StatusOr<int64_t> ParseByteSize(const std::string& text) {
  static const std::pair<const char*, double> kUnits[] = {
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
      {"KB", 1e3},     {"MB", 1e6},        {"GB", 1e9},
      {"B", 1.0}};
  std::string number = text;
  double unit = 1.0;
  for (const auto& [suffix, factor] : kUnits) {
    const std::string s = suffix;
    if (number.size() > s.size() &&
        number.compare(number.size() - s.size(), s.size(), s) == 0) {
      number.resize(number.size() - s.size());
      unit = factor;
      break;
    }
  }
  double value = 0.0;
  if (!absl::SimpleAtod(number, &value) || !std::isfinite(value) ||
      value <= 0 || value * unit > 9e18) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", text, "\" is not a size (e.g. 512MiB, 16GiB, 1.5GB)"));
  }
  return static_cast<int64_t>(value * unit);
}

absl::StatusOr<StageMemory> EstimateStageMemory(const ModelDef& def,
                                                StageRange range,
                                                int micro_rows, int in_flight,
                                                int optimizer_buffers,
                                                bool accumulates) {
  if (micro_rows < 1 || in_flight < 1 || optimizer_buffers < 0) {
    return absl::InvalidArgumentError(
        "stage memory: rows, micro-batches in flight must be >= 1");
  }
  ASSIGN_OR_RETURN(std::vector<SampleShape> shapes, InferShapes(def));
  ASSIGN_OR_RETURN(ParameterLayout layout, ModelParameterLayout(def));
  ASSIGN_OR_RETURN(ParameterLayout state_layout, ModelStateLayout(def));
  ASSIGN_OR_RETURN(LayerStack stack,
                   BuildLayerStack(def, shapes, layout, state_layout,
                                   range.first_layer, range.end_layer));
  const int64_t rows = micro_rows;
  const int64_t input = range.first_layer == 0
                            ? ShapeElements(def.input.shape)
                            : ShapeElements(shapes[range.first_layer - 1]);
  const int64_t output = ShapeElements(shapes[range.end_layer - 1]);
  int64_t per_slot = input + output + (range.first_layer > 0 ? input : 0);
  int64_t widest = input;
  int64_t layer_workspace = 0;  // per slot: each slot has its own layers
  for (int i = range.first_layer; i < range.end_layer; ++i) {
    const Layer& layer = *stack.layers[i - range.first_layer];
    widest = std::max(widest, ShapeElements(shapes[i]));
    if (!layer.IsView()) per_slot += ShapeElements(shapes[i]);
    layer_workspace += layer.WorkspaceElements(micro_rows);
  }
  StageMemory m;
  m.parameter_bytes = 4 * (stack.param_count + stack.state_count);
  m.gradient_bytes =
      4 * (stack.param_count + (accumulates ? stack.LargestLayerParams() : 0));
  m.optimizer_bytes = 4 * stack.param_count * optimizer_buffers;
  m.activation_bytes = 4 * rows * per_slot * in_flight;
  m.workspace_bytes = 4 * (2 * rows * widest + layer_workspace * in_flight);
  return m;
}

absl::Status CheckPipelineMemory(const ModelDef& def,
                                 const std::vector<StageRange>& split,
                                 int batch, int micro_batches,
                                 PipelineSchedule schedule,
                                 int optimizer_buffers, int64_t budget_bytes,
                                 absl::string_view remedy) {
  if (budget_bytes <= 0) return absl::OkStatus();
  if (micro_batches < 1 || micro_batches > batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("micro-batches must be in [1, batch = ", batch, "], got ",
                     micro_batches));
  }
  const int stages = static_cast<int>(split.size());
  const int rows = (batch + micro_batches - 1) / micro_batches;
  for (int s = 0; s < stages; ++s) {
    ASSIGN_OR_RETURN(StageMemory m, EstimateStageMemory(
                                        def, split[s], rows,
                                        PeakMicroBatchesInFlight(
                                            schedule, stages, s, micro_batches),
                                        optimizer_buffers, micro_batches > 1));
    if (m.total() <= budget_bytes) continue;
    return absl::ResourceExhaustedError(absl::StrCat(
        stages == 1 ? "the model" : absl::StrCat("pipeline stage ", s),
        " (layers ", StageRangesString({&split[s], 1}), ") needs about ",
        MiB(m.total()), " per worker (parameters ", MiB(m.parameter_bytes),
        ", gradients ", MiB(m.gradient_bytes), ", optimizer ",
        MiB(m.optimizer_bytes), ", activations ", MiB(m.activation_bytes),
        ", workspace ", MiB(m.workspace_bytes),
        "), over the worker memory "
        "budget of ",
        MiB(budget_bytes), ": ", remedy));
  }
  return absl::OkStatus();
}

}  // namespace ferry

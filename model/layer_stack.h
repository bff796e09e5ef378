// The layers [first, end) of a ModelDef built on their shapes, with where
// each finds its parameters and state: the part SequentialModel (all layers)
// and PipelineStage (one stage's) share.
#ifndef FERRY_MODEL_LAYER_STACK_H_
#define FERRY_MODEL_LAYER_STACK_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "model/layer.h"
#include "model/model_def.h"
#include "model/parameter_layout.h"
#include "model/shape_inference.h"

namespace ferry {

// Where one layer's tensors are, relative to the stack's first parameter
// (and first state element).
struct LayerSlot {
  int64_t param_offset = 0;
  int64_t param_count = 0;
  int64_t state_offset = 0;
  bool has_state = false;
};

struct LayerStack {
  std::vector<std::unique_ptr<Layer>> layers;  // [i]: layer first + i
  std::vector<LayerSlot> slots;
  // The stack's tensors in the model's layouts: [offset, offset + count).
  int64_t param_offset = 0;
  int64_t param_count = 0;
  int64_t state_offset = 0;
  int64_t state_count = 0;
  // Index (within the stack) of the first layer with parameters; the stack's
  // size when none has any.
  int first_param_layer = 0;

  // The most parameters one layer of the stack has (0 when none has any):
  // the scratch an accumulating backward pass writes a layer's gradient to
  // before adding it.
  int64_t LargestLayerParams() const {
    int64_t largest = 0;
    for (const LayerSlot& s : slots) largest = std::max(largest, s.param_count);
    return largest;
  }
};

// Builds layers [first, end) of `def` (each with its index in the whole
// model, so dropout masks are the model's). `shapes` = InferShapes(def),
// `layout` and `state_layout` the model's ModelParameterLayout and
// ModelStateLayout. INVALID_ARGUMENT for a range outside the model or what
// MakeLayer refuses.
absl::StatusOr<LayerStack> BuildLayerStack(
    const ModelDef& def, const std::vector<SampleShape>& shapes,
    const ParameterLayout& layout, const ParameterLayout& state_layout,
    int first, int end);

}  // namespace ferry

#endif  // FERRY_MODEL_LAYER_STACK_H_

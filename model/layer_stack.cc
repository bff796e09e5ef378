#include "model/layer_stack.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/model_params.h"

namespace ferry {

absl::StatusOr<LayerStack> BuildLayerStack(
    const ModelDef& def, const std::vector<SampleShape>& shapes,
    const ParameterLayout& layout, const ParameterLayout& state_layout,
    int first, int end) {
  const int n = static_cast<int>(def.layers.size());
  if (first < 0 || end > n || first >= end) {
    return absl::InvalidArgumentError(absl::StrCat("layers [", first, ", ", end,
                                                   ") are not a non-empty "
                                                   "range of the model's ",
                                                   n, " layers"));
  }
  // The model's tensors before the stack.
  size_t param_tensor = 0;
  size_t state_tensor = 0;
  for (int i = 0; i < first; ++i) {
    param_tensor += LayerParamDefs(def.layers[i]).size();
    state_tensor += LayerStateDefs(def.layers[i]).size();
  }
  LayerStack stack;
  const auto& tensors = layout.tensors();
  const auto& state_tensors = state_layout.tensors();
  stack.param_offset = param_tensor < tensors.size()
                           ? tensors[param_tensor].offset
                           : layout.total_elements();
  stack.state_offset = state_tensor < state_tensors.size()
                           ? state_tensors[state_tensor].offset
                           : state_layout.total_elements();
  stack.first_param_layer = end - first;
  for (int i = first; i < end; ++i) {
    const LayerDef& d = def.layers[i];
    const SampleShape& in = i == 0 ? def.input.shape : shapes[i - 1];
    ASSIGN_OR_RETURN(std::unique_ptr<Layer> layer,
                     MakeLayer(d, i, in, shapes[i]));
    stack.layers.push_back(std::move(layer));
    LayerSlot slot;
    const size_t params = LayerParamDefs(d).size();
    if (params > 0) {
      slot.param_offset = tensors[param_tensor].offset - stack.param_offset;
      for (size_t t = 0; t < params; ++t) {
        slot.param_count += tensors[param_tensor + t].numel;
      }
      stack.param_count += slot.param_count;
      param_tensor += params;
      stack.first_param_layer = std::min(stack.first_param_layer, i - first);
    }
    const size_t states = LayerStateDefs(d).size();
    if (states > 0) {
      slot.has_state = true;
      slot.state_offset =
          state_tensors[state_tensor].offset - stack.state_offset;
      for (size_t t = 0; t < states; ++t) {
        stack.state_count += state_tensors[state_tensor + t].numel;
      }
      state_tensor += states;
    }
    stack.slots.push_back(slot);
  }
  return stack;
}

}  // namespace ferry

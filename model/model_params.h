// A ModelDef's tensors, without a backend: the trainable parameter layout, the
// non-trainable state layout (BatchNorm running statistics), and their initial
// values from a seed. Servers, the coordinator and the cost model use these;
// workers get the same from SequentialModel.
//
// Names and shapes are exactly torch.nn.Sequential(*layers).state_dict()'s:
// "<layer index>.weight" / ".bias" (Conv2d [out, in, kh, kw], Linear
// [out, in], BatchNorm [C]) in the parameter layout, and
// "<index>.running_mean", ".running_var" ([C]) and ".num_batches_tracked"
// ([], one element, stored as fp32) in the state layout. Tensors are in layer
// order, so each layer's parameters form one contiguous range.
#ifndef FERRY_MODEL_MODEL_PARAMS_H_
#define FERRY_MODEL_MODEL_PARAMS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/model_def.h"
#include "model/parameter_layout.h"

namespace ferry {

// The tensors of one layer, names without the "<index>." prefix.
std::vector<ParameterLayout::TensorDef> LayerParamDefs(const LayerDef& layer);
std::vector<ParameterLayout::TensorDef> LayerStateDefs(const LayerDef& layer);

// INVALID_ARGUMENT for an invalid def (ValidateModel); RESOURCE_EXHAUSTED
// beyond the layout limits (parameter_layout.h).
absl::StatusOr<ParameterLayout> ModelParameterLayout(const ModelDef& def);
// Empty layout for models without BatchNorm.
absl::StatusOr<ParameterLayout> ModelStateLayout(const ModelDef& def);

// The flat buffer of a distributed job (what workers exchange, shards hold
// and checkpoint, evaluators read): every tensor of ModelParameterLayout, then
// every tensor of ModelStateLayout. The first ModelParameterLayout(def)
// .total_elements() are trained by the optimizer; the rest is state, which
// each step moves by the contributors' sample-weighted mean change
// (docs/models.md, "BatchNorm in distributed jobs"). Equals
// ModelParameterLayout for a model without state.
absl::StatusOr<ParameterLayout> ModelJobLayout(const ModelDef& def);

// Deterministic initial parameters (bit-identical on every platform), each
// tensor as its kind says (LayerTensor::init, layer_kinds.h): one
// mt19937_64 seeded with `seed` draws every kFanNormal tensor in layer order
// (FillNormal); a Linear or Conv2d weight is He-normal (std sqrt(2/fan_in),
// fan_in = in_features or in_channels * kh * kw) when the next layer that is
// not Dropout, BatchNorm, pooling or Flatten is a ReLU, else Xavier-normal
// (std sqrt(2/(fan_in + fan_out))); biases 0; BatchNorm weight 1, bias 0. For
// MlpModelDef(sizes) this equals MlpInitialParameters(sizes, ...).
// REQUIRES: `layout` == ModelParameterLayout(def).
std::vector<float> ModelInitialParameters(const ModelDef& def,
                                          const ParameterLayout& layout,
                                          uint64_t seed);
// Initial state, as each kind says: running_mean 0, running_var 1,
// num_batches_tracked 0.
// REQUIRES: `layout` == ModelStateLayout(def).
std::vector<float> ModelInitialState(const ModelDef& def,
                                     const ParameterLayout& layout);
// ModelInitialParameters followed by ModelInitialState: the initial values of
// ModelJobLayout(def).
absl::StatusOr<std::vector<float>> ModelJobInitialValues(const ModelDef& def,
                                                         uint64_t seed);
// ModelJobInitialValues(def, seed) written into `out` (ModelJobLayout(def)'s
// size) without a copy of them held meanwhile (a large model's ring member
// starts from them). INVALID_ARGUMENT when `out` is another size.
absl::Status FillModelJobInitialValues(const ModelDef& def, uint64_t seed,
                                       absl::Span<float> out);
// Elements [begin, end) of ModelJobInitialValues(def, seed), the same
// values, holding only them (a shard's slice of a large model).
// INVALID_ARGUMENT for a range outside the model's values.
absl::StatusOr<std::vector<float>> ModelJobInitialSlice(const ModelDef& def,
                                                        uint64_t seed,
                                                        int64_t begin,
                                                        int64_t end);

}  // namespace ferry

#endif  // FERRY_MODEL_MODEL_PARAMS_H_

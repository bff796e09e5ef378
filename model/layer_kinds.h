// The registry of layer kinds: one LayerKind per torch.nn class ferry
// implements, holding everything the model code decides per kind, so that
// parsing, shape inference, tensors, initialization, pipeline costs and
// layer construction are lookups here instead of switches.
//
// Adding a layer kind: one .cc file in model/ with its Layer class and its
// LayerKind (argument parsing and writing, output shape, tensors, factory),
// declared in layer_families.h and listed once in the table of
// layer_kinds.cc; the backend ops it needs come from an op family of
// compute/layer_ops.h (a new family: its interface there, one file per
// backend, one line per backend's family table). Arguments no LayerDef field
// holds add fields to LayerDef (model_def.h). A kind defined outside model/
// (a test's) joins with RegisterLayerKind and needs no edit here.
//
// Thread safety: lookups may run on any thread; RegisterLayerKind must
// happen before the kind is parsed anywhere (e.g. at start-up).
#ifndef FERRY_MODEL_LAYER_KINDS_H_
#define FERRY_MODEL_LAYER_KINDS_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/layer.h"
#include "model/layer_args.h"
#include "model/model_def.h"
#include "model/parameter_layout.h"
#include "model/shape_inference.h"

namespace ferry {

// How a tensor of a layer starts (model_params.h has the draws).
enum class TensorInit {
  kZeros,
  kOnes,
  // Normal with std sqrt(2 / fan_in) (He) when the next layer that is not
  // kTransparent is a ReLU, else sqrt(2 / (fan_in + fan_out)) (Xavier).
  kFanNormal,
};

// One tensor of a layer: its name without the "<index>." prefix (torch's
// state_dict name), its shape and how it starts.
struct LayerTensor {
  ParameterLayout::TensorDef def;
  TensorInit init = TensorInit::kZeros;
  int64_t fan_in = 0;  // kFanNormal only
  int64_t fan_out = 0;
};

// What a layer is to the initialization of the weights before it.
enum class ActivationRole {
  kOther,        // ends the search (Linear, Conv2d)
  kRelu,         // the weights before it are He-initialized
  kTransparent,  // looked through (Dropout, BatchNorm, pooling, Flatten)
};

struct LayerKind {
  // The torch.nn class name: the "type" of the JSON format.
  const char* name = "";
  // Reads the layer's JSON args into `def` (whose type is set) with `r`,
  // validating types and ranges; null: the kind takes no args. The caller
  // runs r.Finish(), which refuses unread keys.
  absl::Status (*parse_args)(LayerArgReader& r, LayerDef& def) = nullptr;
  // Writes `def`'s args in a fixed order; null: none.
  void (*write_args)(const LayerDef& def, LayerArgWriter& w) = nullptr;
  // The per-sample output for input `in`, checking the fields of defs built
  // in code too. INVALID_ARGUMENT with a message the caller prefixes with
  // "layer <index> (<name>): ".
  absl::StatusOr<SampleShape> (*output_shape)(const LayerDef& def,
                                              const SampleShape& in) = nullptr;
  // The trainable tensors, in state_dict order; null: none.
  std::vector<LayerTensor> (*params)(const LayerDef& def) = nullptr;
  // The non-trainable buffers (running statistics), in state_dict order;
  // null: none.
  std::vector<LayerTensor> (*state)(const LayerDef& def) = nullptr;
  ActivationRole activation = ActivationRole::kOther;
  // Forward FLOPs per sample given the output shape (the pipeline's compute
  // balance); null: none counted (the split charges the output's size).
  double (*forward_flops)(const LayerDef& def,
                          const SampleShape& out) = nullptr;
  // The layer at position `index` with shapes from InferShapes;
  // INVALID_ARGUMENT (RefuseLayerShapes) when they do not suit it.
  absl::StatusOr<std::unique_ptr<Layer>> (*make)(
      const LayerDef& def, int index, const SampleShape& in,
      const SampleShape& out) = nullptr;
};

// Every registered kind: the built-in ones in their table's order, then the
// ones RegisterLayerKind added, in order.
std::vector<const LayerKind*> LayerKinds();

// Adds `kind` (which must outlive every use) to the registry.
// INVALID_ARGUMENT when a kind of that name exists, its name is empty or it
// lacks output_shape or make.
absl::Status RegisterLayerKind(const LayerKind& kind);

// "layer <index> (<name>): needs <need>, got <in> -> <out>", the factory's
// refusal of shapes that do not suit its layer.
absl::Status RefuseLayerShapes(const LayerDef& def, int index,
                               const SampleShape& in, const SampleShape& out,
                               const char* need);

}  // namespace ferry

#endif  // FERRY_MODEL_LAYER_KINDS_H_

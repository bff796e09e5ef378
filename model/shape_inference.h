// Shape inference and validation of a ModelDef (pure, no backend).
//
// Shapes are per sample, without the batch dimension: [C, H, W] for images
// and feature maps, [F] for vectors. Layers accept:
//   Linear        [F] with F == in_features            -> [out_features]
//   Conv2d        [C, H, W] with C == in_channels      -> [out, OH, OW]
//   MaxPool2d,
//   AvgPool2d     [C, H, W]                            -> [C, OH, OW]
//   BatchNorm2d   [C, H, W] with C == num_features     -> same
//   BatchNorm1d   [F] with F == num_features           -> same
//   Flatten       any                                  -> [product]
//   ReLU, Dropout any                                  -> same
// and a registered kind states its own (layer_kinds.h: output_shape).
// (PyTorch's Linear would also act on the last dimension of [C, H, W]; ferry
// asks for a Flatten first, which is what such models mean.)
//
// Errors are INVALID_ARGUMENT naming the layer by index and torch type, e.g.
// "layer 7 (Linear): in_features is 9000 but its input has 9216 features".
#ifndef FERRY_MODEL_SHAPE_INFERENCE_H_
#define FERRY_MODEL_SHAPE_INFERENCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/model_def.h"

namespace ferry {

using SampleShape = std::vector<int64_t>;

// "[1, 28, 28]".
std::string ShapeString(const SampleShape& shape);
// Product of the dimensions (saturates at 2^62; 0 for a dimension <= 0).
int64_t ShapeElements(const SampleShape& shape);

// True for a dimension in [1, 2^31 - 1], the range every shape keeps.
bool IsValidDim(int64_t v);

// The [out_channels, OH, OW] output of a window (kernel_size, stride,
// padding of `d`) over a [C, H, W] input; INVALID_ARGUMENT, without the
// layer's prefix, for another rank or a window that does not fit.
absl::StatusOr<SampleShape> WindowOutputShape(const LayerDef& d,
                                              const SampleShape& in,
                                              int64_t out_channels);

// The output shape of every layer: result[i] is layer i's output; the input
// shape is def.input.shape. Checks each layer's arguments against its input
// (and their ranges, for defs built in code).
absl::StatusOr<std::vector<SampleShape>> InferShapes(const ModelDef& def);

// InferShapes plus: a non-empty layer list, input shape of rank 1 or 3 with
// positive dimensions, std > 0, and a last layer whose output is [classes].
absl::Status ValidateModel(const ModelDef& def);

}  // namespace ferry

#endif  // FERRY_MODEL_SHAPE_INFERENCE_H_

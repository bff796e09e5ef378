// The built-in layer kinds (layer_kinds.h), each defined in the .cc file of
// its layer family and listed once in the table of layer_kinds.cc.
#ifndef FERRY_MODEL_LAYER_FAMILIES_H_
#define FERRY_MODEL_LAYER_FAMILIES_H_

#include "model/layer_kinds.h"

namespace ferry {

// dense_layer.cc
extern const LayerKind kLinearKind;
// conv_layer.cc (im2col + GEMM over groups of samples)
extern const LayerKind kConv2dKind;
// pool_layers.cc
extern const LayerKind kMaxPool2dKind;
extern const LayerKind kAvgPool2dKind;
// elementwise_layers.cc
extern const LayerKind kReluKind;
extern const LayerKind kDropoutKind;
extern const LayerKind kFlattenKind;
// batch_norm_layer.cc
extern const LayerKind kBatchNorm2dKind;
extern const LayerKind kBatchNorm1dKind;

}  // namespace ferry

#endif  // FERRY_MODEL_LAYER_FAMILIES_H_

// Constructors of the layer families (one .cc file each), used by MakeLayer
// (layer.cc). Shapes are per sample and already checked by InferShapes.
#ifndef FERRY_MODEL_LAYER_FAMILIES_H_
#define FERRY_MODEL_LAYER_FAMILIES_H_

#include <memory>

#include "model/layer.h"

namespace ferry {

// dense_layer.cc: Linear.
std::unique_ptr<Layer> MakeLinearLayer(const LayerDef& def);
// conv_layer.cc: Conv2d (im2col + GEMM per sample).
std::unique_ptr<Layer> MakeConv2dLayer(const LayerDef& def,
                                       const SampleShape& in);
// pool_layers.cc: MaxPool2d, AvgPool2d.
std::unique_ptr<Layer> MakePoolLayer(const LayerDef& def,
                                     const SampleShape& in);
// elementwise_layers.cc: ReLU, Dropout, Flatten.
std::unique_ptr<Layer> MakeReluLayer(const SampleShape& in);
std::unique_ptr<Layer> MakeDropoutLayer(const LayerDef& def, int index,
                                        const SampleShape& in);
std::unique_ptr<Layer> MakeFlattenLayer();
// batch_norm_layer.cc: BatchNorm1d, BatchNorm2d.
std::unique_ptr<Layer> MakeBatchNormLayer(const LayerDef& def,
                                          const SampleShape& in);

}  // namespace ferry

#endif  // FERRY_MODEL_LAYER_FAMILIES_H_

#include "model/layer.h"

#include "absl/strings/str_cat.h"
#include "model/layer_families.h"

namespace ferry {

absl::StatusOr<std::unique_ptr<Layer>> MakeLayer(const LayerDef& def, int index,
                                                 const SampleShape& in,
                                                 const SampleShape& out) {
  const bool image_in = in.size() == 3;
  auto refuse = [&](const char* need) -> absl::Status {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer ", index, " (", LayerTypeName(def.type), "): needs ", need,
        ", got ", ShapeString(in), " -> ", ShapeString(out)));
  };
  switch (def.type) {
    case LayerType::kLinear:
      if (in != SampleShape{def.in_features} ||
          out != SampleShape{def.out_features}) {
        return refuse("[in_features] -> [out_features]");
      }
      return MakeLinearLayer(def);
    case LayerType::kConv2d:
      if (!image_in || out.size() != 3) return refuse("[C, H, W]");
      return MakeConv2dLayer(def, in);
    case LayerType::kMaxPool2d:
    case LayerType::kAvgPool2d:
      if (!image_in || out.size() != 3) return refuse("[C, H, W]");
      return MakePoolLayer(def, in);
    case LayerType::kReLU:
      return MakeReluLayer(in);
    case LayerType::kDropout:
      return MakeDropoutLayer(def, index, in);
    case LayerType::kFlatten:
      return MakeFlattenLayer();
    case LayerType::kBatchNorm2d:
      if (!image_in) return refuse("[C, H, W]");
      return MakeBatchNormLayer(def, in);
    case LayerType::kBatchNorm1d:
      if (in.size() != 1) return refuse("[F]");
      return MakeBatchNormLayer(def, in);
  }
  return refuse("a known layer type");
}

}  // namespace ferry

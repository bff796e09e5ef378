// A model as data: the input it expects, its class count and a list of layers
// named after the torch.nn classes that compute the same function, with those
// classes' constructor arguments. This is the `ferry.model.v1` JSON format
// (docs/models.md):
//
//   {"format": "ferry.model.v1",
//    "input": {"shape": [1, 28, 28], "scale": 0.00392156862745098,
//              "mean": 0.286, "std": 0.353},
//    "classes": 10,
//    "layers": [{"type": "Conv2d", "args": {"in_channels": 1, ...}}, ...]}
//
// so that nn.Sequential(*[getattr(nn, l["type"])(**l["args"]) for l in
// spec["layers"]]) builds the same network in PyTorch. The model sees
// (pixel * scale - mean) / std for raw pixel values.
//
// Pure (no backend). Values are plain structs: copyable, thread-compatible.
#ifndef FERRY_MODEL_MODEL_DEF_H_
#define FERRY_MODEL_MODEL_DEF_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ferry {

inline constexpr char kModelFormatV1[] = "ferry.model.v1";

struct LayerKind;  // model/layer_kinds.h

// The kind of a layer: a handle to its registered LayerKind (layer_kinds.h),
// which says everything ferry does with layers of that kind. Two handles are
// equal when they name the same kind. The constants name the built-in kinds;
// a kind registered elsewhere is reached through ParseLayerType.
class LayerType {
 public:
  constexpr explicit LayerType(const LayerKind* kind) : kind_(kind) {}
  const LayerKind& kind() const { return *kind_; }
  bool operator==(const LayerType& other) const = default;

  static const LayerType kLinear;
  static const LayerType kConv2d;
  static const LayerType kMaxPool2d;
  static const LayerType kAvgPool2d;
  static const LayerType kReLU;
  static const LayerType kDropout;
  static const LayerType kFlatten;
  static const LayerType kBatchNorm2d;
  static const LayerType kBatchNorm1d;

 private:
  const LayerKind* kind_;
};

// The torch.nn class name ("Conv2d", ...).
const char* LayerTypeName(LayerType type);
// The registered kind named `name`; INVALID_ARGUMENT for a name no kind has
// (the message lists the registered ones).
absl::StatusOr<LayerType> ParseLayerType(std::string_view name);

// An int or an (h, w) pair, as torch accepts for kernel_size, stride, padding.
struct IntPair {
  int64_t h = 0;
  int64_t w = 0;
  bool operator==(const IntPair&) const = default;
};

// One layer. Only the fields its kind reads are meaningful; the others keep
// their defaults (so == compares layers structurally). A kind with arguments
// none of these hold adds its fields here.
struct LayerDef {
  LayerType type = LayerType::kReLU;
  // Linear
  int64_t in_features = 0;
  int64_t out_features = 0;
  // Conv2d (kernel_size, stride, padding also for the pools)
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  IntPair kernel_size;
  IntPair stride{1, 1};  // pools: defaults to kernel_size
  IntPair padding{0, 0};
  bool bias = true;  // Linear, Conv2d
  // Dropout
  double p = 0.5;
  // BatchNorm1d / BatchNorm2d
  int64_t num_features = 0;
  double eps = 1e-5;
  double momentum = 0.1;

  bool operator==(const LayerDef&) const = default;
};

struct InputSpec {
  std::vector<int64_t> shape;  // [C, H, W] or [F], per sample
  double scale = 1.0 / 255.0;
  double mean = 0.0;
  double std = 1.0;
  bool operator==(const InputSpec&) const = default;
};

struct ModelDef {
  InputSpec input;
  int64_t classes = 0;
  std::vector<LayerDef> layers;
  bool operator==(const ModelDef&) const = default;
};

// Parses and validates ferry.model.v1 JSON: the format tag, every key (unknown
// keys and layer types are refused), argument types and ranges, and that the
// shapes chain (ValidateModel in shape_inference.h). INVALID_ARGUMENT with a
// message that names the layer by index and type.
absl::StatusOr<ModelDef> ParseModelJson(std::string_view text);

// The JSON text of `def` (indented, keys in a fixed order; pairs with h == w
// are written as one int). ParseModelJson(ModelToJson(d)) == d for a valid d.
std::string ModelToJson(const ModelDef& def);

}  // namespace ferry

#endif  // FERRY_MODEL_MODEL_DEF_H_

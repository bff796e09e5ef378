#include "model/shape_inference.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "compute/kernel_math.h"
#include "model/layer_kinds.h"

namespace ferry {
namespace {

constexpr int64_t kMaxDim = (int64_t{1} << 31) - 1;

absl::Status LayerError(int index, const LayerDef& d, const std::string& msg) {
  return absl::InvalidArgumentError(
      absl::StrCat("layer ", index, " (", LayerTypeName(d.type), "): ", msg));
}

absl::StatusOr<SampleShape> LayerOutput(int i, const LayerDef& d,
                                        const SampleShape& in) {
  absl::StatusOr<SampleShape> out = d.type.kind().output_shape(d, in);
  if (!out.ok()) return LayerError(i, d, std::string(out.status().message()));
  return out;
}

}  // namespace

bool IsValidDim(int64_t v) { return v > 0 && v <= kMaxDim; }

absl::StatusOr<SampleShape> WindowOutputShape(const LayerDef& d,
                                              const SampleShape& in,
                                              int64_t out_channels) {
  if (in.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("needs a [C, H, W] input, got ", ShapeString(in)));
  }
  if (!IsValidDim(d.kernel_size.h) || !IsValidDim(d.kernel_size.w) ||
      !IsValidDim(d.stride.h) || !IsValidDim(d.stride.w) || d.padding.h < 0 ||
      d.padding.w < 0 || d.padding.h > kMaxDim || d.padding.w > kMaxDim) {
    return absl::InvalidArgumentError(
        "kernel_size and stride must be positive, padding >= 0");
  }
  const int64_t oh = WindowOutSize(
      static_cast<int>(in[1]), static_cast<int>(d.kernel_size.h),
      static_cast<int>(d.stride.h), static_cast<int>(d.padding.h));
  const int64_t ow = WindowOutSize(
      static_cast<int>(in[2]), static_cast<int>(d.kernel_size.w),
      static_cast<int>(d.stride.w), static_cast<int>(d.padding.w));
  if (oh <= 0 || ow <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel [", d.kernel_size.h, ", ", d.kernel_size.w,
                     "] with padding [", d.padding.h, ", ", d.padding.w,
                     "] does not fit its input ", ShapeString(in)));
  }
  return SampleShape{out_channels, oh, ow};
}

std::string ShapeString(const SampleShape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

int64_t ShapeElements(const SampleShape& shape) {
  constexpr int64_t kSaturated = int64_t{1} << 62;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0) return 0;
    n = n > kSaturated / d ? kSaturated : n * d;  // no overflow on huge shapes
  }
  return n;
}

absl::StatusOr<std::vector<SampleShape>> InferShapes(const ModelDef& def) {
  const SampleShape& input = def.input.shape;
  if (input.size() != 1 && input.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("model input shape must be [C, H, W] or [F], got ",
                     ShapeString(input)));
  }
  for (int64_t dim : input) {
    if (!IsValidDim(dim)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model input shape ", ShapeString(input), " has a bad dimension"));
    }
  }
  if (ShapeElements(input) > kMaxDim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model input shape ", ShapeString(input), " is too large"));
  }
  std::vector<SampleShape> shapes;
  SampleShape current = input;
  for (size_t i = 0; i < def.layers.size(); ++i) {
    ASSIGN_OR_RETURN(current,
                     LayerOutput(static_cast<int>(i), def.layers[i], current));
    if (ShapeElements(current) > kMaxDim) {
      return LayerError(
          static_cast<int>(i), def.layers[i],
          absl::StrCat("output ", ShapeString(current), " is too large"));
    }
    shapes.push_back(current);
  }
  return shapes;
}

absl::Status ValidateModel(const ModelDef& def) {
  if (def.layers.empty()) {
    return absl::InvalidArgumentError("a model needs at least one layer");
  }
  if (!(def.input.std > 0.0) || !std::isfinite(def.input.std) ||
      !std::isfinite(def.input.scale) || !std::isfinite(def.input.mean)) {
    return absl::InvalidArgumentError(
        "model input: scale and mean must be finite, std > 0");
  }
  if (def.classes < 1) {
    return absl::InvalidArgumentError("model classes must be >= 1");
  }
  ASSIGN_OR_RETURN(std::vector<SampleShape> shapes, InferShapes(def));
  const SampleShape& out = shapes.back();
  if (out != SampleShape{def.classes}) {
    const int last = static_cast<int>(def.layers.size()) - 1;
    return LayerError(
        last, def.layers.back(),
        absl::StrCat("the model's output is ", ShapeString(out), " but it has ",
                     def.classes, " classes (the last layer must give [",
                     def.classes, "])"));
  }
  return absl::OkStatus();
}

}  // namespace ferry

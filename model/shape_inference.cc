#include "model/shape_inference.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "compute/kernel_math.h"

namespace ferry {
namespace {

constexpr int64_t kMaxDim = (int64_t{1} << 31) - 1;

absl::Status LayerError(int index, const LayerDef& d, const std::string& msg) {
  return absl::InvalidArgumentError(
      absl::StrCat("layer ", index, " (", LayerTypeName(d.type), "): ", msg));
}

bool Positive(int64_t v) { return v > 0 && v <= kMaxDim; }
bool PositivePair(const IntPair& p) { return Positive(p.h) && Positive(p.w); }

// Output shape of a window layer on [C, H, W].
absl::StatusOr<SampleShape> WindowOutput(int index, const LayerDef& d,
                                         const SampleShape& in,
                                         int64_t out_channels) {
  if (in.size() != 3) {
    return LayerError(
        index, d,
        absl::StrCat("needs a [C, H, W] input, got ", ShapeString(in)));
  }
  if (!PositivePair(d.kernel_size) || !PositivePair(d.stride) ||
      d.padding.h < 0 || d.padding.w < 0 || d.padding.h > kMaxDim ||
      d.padding.w > kMaxDim) {
    return LayerError(index, d,
                      "kernel_size and stride must be positive, padding >= 0");
  }
  const int64_t oh = WindowOutSize(
      static_cast<int>(in[1]), static_cast<int>(d.kernel_size.h),
      static_cast<int>(d.stride.h), static_cast<int>(d.padding.h));
  const int64_t ow = WindowOutSize(
      static_cast<int>(in[2]), static_cast<int>(d.kernel_size.w),
      static_cast<int>(d.stride.w), static_cast<int>(d.padding.w));
  if (oh <= 0 || ow <= 0) {
    return LayerError(
        index, d,
        absl::StrCat("kernel [", d.kernel_size.h, ", ", d.kernel_size.w,
                     "] with padding [", d.padding.h, ", ", d.padding.w,
                     "] does not fit its input ", ShapeString(in)));
  }
  return SampleShape{out_channels, oh, ow};
}

absl::StatusOr<SampleShape> LayerOutput(int i, const LayerDef& d,
                                        const SampleShape& in) {
  switch (d.type) {
    case LayerType::kLinear:
      if (!Positive(d.in_features) || !Positive(d.out_features)) {
        return LayerError(i, d, "in_features and out_features must be > 0");
      }
      if (in.size() != 1) {
        return LayerError(i, d,
                          absl::StrCat("needs a flat [F] input, got ",
                                       ShapeString(in), " (add a Flatten)"));
      }
      if (in[0] != d.in_features) {
        return LayerError(
            i, d,
            absl::StrCat("in_features is ", d.in_features,
                         " but its input has ", in[0], " features"));
      }
      return SampleShape{d.out_features};
    case LayerType::kConv2d:
      if (!Positive(d.in_channels) || !Positive(d.out_channels)) {
        return LayerError(i, d, "in_channels and out_channels must be > 0");
      }
      if (in.size() == 3 && in[0] != d.in_channels) {
        return LayerError(
            i, d,
            absl::StrCat("in_channels is ", d.in_channels,
                         " but its input has ", in[0], " channels"));
      }
      return WindowOutput(i, d, in, d.out_channels);
    case LayerType::kMaxPool2d:
    case LayerType::kAvgPool2d:
      if (2 * d.padding.h > d.kernel_size.h ||
          2 * d.padding.w > d.kernel_size.w) {
        return LayerError(i, d, "padding must be at most half the kernel size");
      }
      return WindowOutput(i, d, in, in.empty() ? 0 : in[0]);
    case LayerType::kBatchNorm2d:
    case LayerType::kBatchNorm1d: {
      const size_t rank = d.type == LayerType::kBatchNorm2d ? 3 : 1;
      if (!Positive(d.num_features)) {
        return LayerError(i, d, "num_features must be > 0");
      }
      if (!(d.eps > 0.0) || !std::isfinite(d.eps) || !(d.momentum >= 0.0) ||
          !(d.momentum <= 1.0)) {
        return LayerError(i, d, "needs eps > 0 and momentum in [0, 1]");
      }
      if (in.size() != rank) {
        return LayerError(
            i, d,
            absl::StrCat("needs a ", rank == 3 ? "[C, H, W]" : "[F]",
                         " input, got ", ShapeString(in)));
      }
      if (in[0] != d.num_features) {
        return LayerError(i, d,
                          absl::StrCat("num_features is ", d.num_features,
                                       " but its input has ", in[0],
                                       rank == 3 ? " channels" : " features"));
      }
      return in;
    }
    case LayerType::kFlatten: {
      const int64_t n = ShapeElements(in);
      if (n > kMaxDim) {
        return LayerError(
            i, d, absl::StrCat("output of ", n, " features is too large"));
      }
      return SampleShape{n};
    }
    case LayerType::kDropout:
      if (!(d.p >= 0.0 && d.p < 1.0)) {
        return LayerError(i, d, absl::StrCat("p must be in [0, 1), got ", d.p));
      }
      return in;
    case LayerType::kReLU:
      return in;
  }
  return LayerError(i, d, "unknown layer type");
}

}  // namespace

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
    if (!Positive(dim)) {
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

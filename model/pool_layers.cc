// MaxPool2d and AvgPool2d over NCHW batches (the backend's pooling kernels;
// max pooling recomputes each window's argmax in the backward pass).
#include <initializer_list>
#include <utility>

#include "common/status_macros.h"
#include "compute/kernel_math.h"
#include "compute/pool_ops.h"
#include "model/layer_families.h"

namespace ferry {
namespace {

class PoolLayer final : public Layer {
 public:
  PoolLayer(const LayerDef& def, const SampleShape& in, bool max) : max_(max) {
    g_.channels = static_cast<int>(in[0]);
    g_.height = static_cast<int>(in[1]);
    g_.width = static_cast<int>(in[2]);
    g_.kernel_h = static_cast<int>(def.kernel_size.h);
    g_.kernel_w = static_cast<int>(def.kernel_size.w);
    g_.stride_h = static_cast<int>(def.stride.h);
    g_.stride_w = static_cast<int>(def.stride.w);
    g_.pad_h = static_cast<int>(def.padding.h);
    g_.pad_w = static_cast<int>(def.padding.w);
  }

  absl::Status Forward(const LayerContext& ctx, const float* /*params*/,
                       float* /*state*/, const float* x, float* y) override {
    ASSIGN_OR_RETURN(PoolOps * pool, ctx.backend->LayerOpsOf<PoolOps>());
    return max_ ? pool->MaxPoolForward(ctx.batch, g_, x, y)
                : pool->AvgPoolForward(ctx.batch, g_, x, y);
  }

  absl::Status Backward(const LayerContext& ctx, const float* /*params*/,
                        const float* x, const float* /*y*/, const float* dy,
                        float* dx, float* /*dparams*/) override {
    if (dx == nullptr) return absl::OkStatus();
    ASSIGN_OR_RETURN(PoolOps * pool, ctx.backend->LayerOpsOf<PoolOps>());
    return max_ ? pool->MaxPoolBackward(ctx.batch, g_, x, dy, dx)
                : pool->AvgPoolBackward(ctx.batch, g_, dy, dx);
  }

 private:
  bool max_;
  WindowGeometry g_;
};

bool PaddingFits(const LayerDef& d) {
  return 2 * d.padding.h <= d.kernel_size.h &&
         2 * d.padding.w <= d.kernel_size.w;
}

// kernel_size, stride (default: kernel_size), padding (at most half the
// kernel), ceil_mode and the kind's `defaults_only` arguments at PyTorch's
// defaults.
absl::Status ParsePool(
    LayerArgReader& r, LayerDef& d,
    std::initializer_list<std::pair<const char*, nlohmann::json>>
        defaults_only) {
  ASSIGN_OR_RETURN(d.kernel_size, r.Pair("kernel_size", true, {}, false));
  ASSIGN_OR_RETURN(d.stride, r.Pair("stride", false, d.kernel_size, false));
  ASSIGN_OR_RETURN(d.padding, r.Pair("padding", false, {0, 0}, true));
  RETURN_IF_ERROR(r.OnlyDefault("ceil_mode", false));
  for (const auto& [key, value] : defaults_only) {
    RETURN_IF_ERROR(r.OnlyDefault(key, value));
  }
  if (!PaddingFits(d)) {
    return r.Error("padding must be at most half the kernel size");
  }
  return absl::OkStatus();
}

absl::Status ParseMaxPool2d(LayerArgReader& r, LayerDef& d) {
  return ParsePool(r, d, {{"dilation", 1}, {"return_indices", false}});
}

absl::Status ParseAvgPool2d(LayerArgReader& r, LayerDef& d) {
  return ParsePool(
      r, d, {{"count_include_pad", true}, {"divisor_override", nullptr}});
}

void WritePool(const LayerDef& d, LayerArgWriter& w) {
  w.Pair("kernel_size", d.kernel_size);
  w.Pair("stride", d.stride);
  w.Pair("padding", d.padding);
}

absl::StatusOr<SampleShape> PoolOutput(const LayerDef& d,
                                       const SampleShape& in) {
  if (!PaddingFits(d)) {
    return absl::InvalidArgumentError(
        "padding must be at most half the kernel size");
  }
  return WindowOutputShape(d, in, in.empty() ? 0 : in[0]);
}

template <bool kMax>
absl::StatusOr<std::unique_ptr<Layer>> MakePool(const LayerDef& def, int index,
                                                const SampleShape& in,
                                                const SampleShape& out) {
  if (in.size() != 3 || out.size() != 3) {
    return RefuseLayerShapes(def, index, in, out, "[C, H, W]");
  }
  return std::make_unique<PoolLayer>(def, in, kMax);
}

}  // namespace

const LayerKind kMaxPool2dKind = {
    .name = "MaxPool2d",
    .parse_args = &ParseMaxPool2d,
    .write_args = &WritePool,
    .output_shape = &PoolOutput,
    .activation = ActivationRole::kTransparent,
    .make = &MakePool<true>,
};

const LayerKind kAvgPool2dKind = {
    .name = "AvgPool2d",
    .parse_args = &ParseAvgPool2d,
    .write_args = &WritePool,
    .output_shape = &PoolOutput,
    .activation = ActivationRole::kTransparent,
    .make = &MakePool<false>,
};

}  // namespace ferry

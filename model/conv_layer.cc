// Conv2d as im2col + GEMM over groups of samples: for a group of g samples,
// cols[C*kh*kw, g*OH*OW] = im2col(x_group) and one GEMM gives
// [out, g*OH*OW] = W[out, C*kh*kw] cols, which SwapLeadingAxes turns into
// NCHW (with g = 1 the GEMM's output already is NCHW). A group is as many
// samples as fit the backend's columns budget (at least one): on a GPU a
// batch then costs a few large GEMMs instead of one small GEMM per sample; on
// the CPU the budget keeps a wide layer's columns in cache (one sample of the
// ConvNet's second convolution, 650 KB) and still groups narrow layers. The
// backward pass recomputes cols (cheaper in memory than keeping them for the
// whole batch), accumulates dW over the groups with beta = 1, and sends dx
// through W^T dy and col2im.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compute/conv_ops.h"
#include "compute/kernel_math.h"
#include "model/layer_families.h"

namespace ferry {
namespace {

// Floats of one cols workspace: bounds the group size.
constexpr int64_t kDeviceColsBudget = int64_t{4} << 20;  // 16 MiB
constexpr int64_t kHostColsBudget = int64_t{256} << 10;  // 1 MiB

class Conv2dLayer final : public Layer {
 public:
  Conv2dLayer(const LayerDef& def, const SampleShape& in)
      : out_channels_(static_cast<int>(def.out_channels)), bias_(def.bias) {
    g_.channels = static_cast<int>(in[0]);
    g_.height = static_cast<int>(in[1]);
    g_.width = static_cast<int>(in[2]);
    g_.kernel_h = static_cast<int>(def.kernel_size.h);
    g_.kernel_w = static_cast<int>(def.kernel_size.w);
    g_.stride_h = static_cast<int>(def.stride.h);
    g_.stride_w = static_cast<int>(def.stride.w);
    g_.pad_h = static_cast<int>(def.padding.h);
    g_.pad_w = static_cast<int>(def.padding.w);
    rows_ = static_cast<int>(ColRows(g_));
    spatial_ = OutHeight(g_) * OutWidth(g_);
    in_size_ = static_cast<size_t>(g_.channels) * g_.height * g_.width;
    out_size_ = static_cast<size_t>(out_channels_) * spatial_;
  }

  // An upper bound: the device budget's groups (host backends group fewer).
  int64_t WorkspaceElements(int batch) const override {
    const int64_t g = GroupFor(batch, kDeviceColsBudget);
    return g * spatial_ * (2 * int64_t{rows_} + out_channels_);
  }

  absl::Status Reserve(ComputeBackend* backend, int batch) override {
    const int group = GroupFor(
        batch, backend->IsHostMemory() ? kHostColsBudget : kDeviceColsBudget);
    if (group <= group_) return absl::OkStatus();
    const size_t columns = static_cast<size_t>(group) * spatial_;
    ASSIGN_OR_RETURN(cols_, backend->Allocate(columns * rows_));
    ASSIGN_OR_RETURN(dcols_, backend->Allocate(columns * rows_));
    ASSIGN_OR_RETURN(staged_, backend->Allocate(columns * out_channels_));
    group_ = group;
    return absl::OkStatus();
  }

  absl::Status Forward(const LayerContext& ctx, const float* params,
                       float* /*state*/, const float* x, float* y) override {
    ComputeBackend* b = ctx.backend;
    ASSIGN_OR_RETURN(ConvOps * conv, b->LayerOpsOf<ConvOps>());
    RETURN_IF_ERROR(CheckReserved(ctx.batch));
    for (int n0 = 0; n0 < ctx.batch; n0 += group_) {
      const int g = std::min(group_, ctx.batch - n0);
      const int columns = g * spatial_;
      RETURN_IF_ERROR(conv->Im2Col(g_, g, x + n0 * in_size_, cols_.data()));
      // With one sample, [out, OH*OW] already is NCHW.
      float* out = g == 1 ? y + n0 * out_size_ : staged_.data();
      RETURN_IF_ERROR(b->Gemm(Transpose::kNo, Transpose::kNo, out_channels_,
                              columns, rows_, 1.0f, params, rows_, cols_.data(),
                              columns, 0.0f, out, columns));
      if (g > 1) {
        RETURN_IF_ERROR(conv->SwapLeadingAxes(out_channels_, g, spatial_, out,
                                              y + n0 * out_size_));
      }
    }
    if (bias_) {
      RETURN_IF_ERROR(conv->AddChannelBias(ctx.batch, out_channels_, spatial_,
                                           params + Weights(), y));
    }
    return absl::OkStatus();
  }

  absl::Status Backward(const LayerContext& ctx, const float* params,
                        const float* x, const float* /*y*/, const float* dy,
                        float* dx, float* dparams) override {
    ComputeBackend* b = ctx.backend;
    ASSIGN_OR_RETURN(ConvOps * conv, b->LayerOpsOf<ConvOps>());
    if (bias_) {
      RETURN_IF_ERROR(conv->ChannelBiasGrad(ctx.batch, out_channels_, spatial_,
                                            dy, dparams + Weights()));
    }
    if (ctx.batch == 0) return b->Fill(0.0f, Weights(), dparams);
    RETURN_IF_ERROR(CheckReserved(ctx.batch));
    for (int n0 = 0; n0 < ctx.batch; n0 += group_) {
      const int g = std::min(group_, ctx.batch - n0);
      const int columns = g * spatial_;
      // dy_t[out, g*OH*OW]: the group's dy with the sample axis inside.
      const float* dy_t = dy + n0 * out_size_;
      if (g > 1) {
        RETURN_IF_ERROR(conv->SwapLeadingAxes(g, out_channels_, spatial_, dy_t,
                                              staged_.data()));
        dy_t = staged_.data();
      }
      RETURN_IF_ERROR(conv->Im2Col(g_, g, x + n0 * in_size_, cols_.data()));
      // dW[out, rows] (+)= dy_t[out, columns] cols[rows, columns]^T.
      RETURN_IF_ERROR(b->Gemm(Transpose::kNo, Transpose::kYes, out_channels_,
                              rows_, columns, 1.0f, dy_t, columns, cols_.data(),
                              columns, n0 == 0 ? 0.0f : 1.0f, dparams, rows_));
      if (dx != nullptr) {
        // dcols[rows, columns] = W[out, rows]^T dy_t[out, columns].
        RETURN_IF_ERROR(b->Gemm(Transpose::kYes, Transpose::kNo, rows_, columns,
                                out_channels_, 1.0f, params, rows_, dy_t,
                                columns, 0.0f, dcols_.data(), columns));
        RETURN_IF_ERROR(conv->Col2Im(g_, g, dcols_.data(), dx + n0 * in_size_));
      }
    }
    return absl::OkStatus();
  }

 private:
  size_t Weights() const { return static_cast<size_t>(out_channels_) * rows_; }

  // Samples per GEMM for batches of up to `batch` and `budget` floats of
  // columns.
  int GroupFor(int batch, int64_t budget) const {
    const int64_t per_sample = std::max<int64_t>(1, int64_t{rows_} * spatial_);
    return static_cast<int>(
        std::clamp<int64_t>(budget / per_sample, 1, std::max(1, batch)));
  }

  absl::Status CheckReserved(int batch) const {
    if (group_ > 0 || batch == 0) return absl::OkStatus();
    return absl::FailedPreconditionError("Conv2d: Reserve was not called");
  }

  WindowGeometry g_;
  int out_channels_;
  bool bias_;
  int rows_ = 0;     // C * kh * kw
  int spatial_ = 0;  // OH * OW
  size_t in_size_ = 0;
  size_t out_size_ = 0;
  int group_ = 0;  // samples per GEMM the workspaces hold
  DeviceBuffer cols_;
  DeviceBuffer dcols_;
  DeviceBuffer staged_;  // [out, group*OH*OW] forward, dy_t backward
};

absl::Status ParseConv2d(LayerArgReader& r, LayerDef& d) {
  ASSIGN_OR_RETURN(d.in_channels, r.Int("in_channels", true, 0));
  ASSIGN_OR_RETURN(d.out_channels, r.Int("out_channels", true, 0));
  ASSIGN_OR_RETURN(d.kernel_size, r.Pair("kernel_size", true, {}, false));
  ASSIGN_OR_RETURN(d.stride, r.Pair("stride", false, {1, 1}, false));
  ASSIGN_OR_RETURN(d.padding, r.Pair("padding", false, {0, 0}, true));
  ASSIGN_OR_RETURN(d.bias, r.Bool("bias", true));
  RETURN_IF_ERROR(r.OnlyDefault("dilation", 1));
  RETURN_IF_ERROR(r.OnlyDefault("groups", 1));
  RETURN_IF_ERROR(r.OnlyDefault("padding_mode", "zeros"));
  return absl::OkStatus();
}

void WriteConv2d(const LayerDef& d, LayerArgWriter& w) {
  w.Int("in_channels", d.in_channels);
  w.Int("out_channels", d.out_channels);
  w.Pair("kernel_size", d.kernel_size);
  w.Pair("stride", d.stride);
  w.Pair("padding", d.padding);
  w.Bool("bias", d.bias);
}

absl::StatusOr<SampleShape> Conv2dOutput(const LayerDef& d,
                                         const SampleShape& in) {
  if (!IsValidDim(d.in_channels) || !IsValidDim(d.out_channels)) {
    return absl::InvalidArgumentError(
        "in_channels and out_channels must be > 0");
  }
  if (in.size() == 3 && in[0] != d.in_channels) {
    return absl::InvalidArgumentError(
        absl::StrCat("in_channels is ", d.in_channels, " but its input has ",
                     in[0], " channels"));
  }
  return WindowOutputShape(d, in, d.out_channels);
}

// torch's Conv2d: weight [out, in, kh, kw], bias [out].
std::vector<LayerTensor> Conv2dParams(const LayerDef& d) {
  const int64_t window = d.kernel_size.h * d.kernel_size.w;
  std::vector<LayerTensor> tensors = {
      {{"weight",
        {d.out_channels, d.in_channels, d.kernel_size.h, d.kernel_size.w}},
       TensorInit::kFanNormal,
       d.in_channels * window,
       d.out_channels * window}};
  if (d.bias) tensors.push_back({{"bias", {d.out_channels}}});
  return tensors;
}

double Conv2dFlops(const LayerDef& d, const SampleShape& out) {
  return 2.0 * static_cast<double>(ShapeElements(out)) *
         static_cast<double>(d.in_channels * d.kernel_size.h * d.kernel_size.w);
}

absl::StatusOr<std::unique_ptr<Layer>> MakeConv2d(const LayerDef& def,
                                                  int index,
                                                  const SampleShape& in,
                                                  const SampleShape& out) {
  if (in.size() != 3 || out.size() != 3) {
    return RefuseLayerShapes(def, index, in, out, "[C, H, W]");
  }
  return std::make_unique<Conv2dLayer>(def, in);
}

}  // namespace

const LayerKind kConv2dKind = {
    .name = "Conv2d",
    .parse_args = &ParseConv2d,
    .write_args = &WriteConv2d,
    .output_shape = &Conv2dOutput,
    .params = &Conv2dParams,
    .forward_flops = &Conv2dFlops,
    .make = &MakeConv2d,
};

}  // namespace ferry

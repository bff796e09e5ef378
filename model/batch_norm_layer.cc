// BatchNorm1d ([N, F]) and BatchNorm2d ([N, C, H, W]): parameters weight
// (gamma) and bias (beta), state running_mean, running_var,
// num_batches_tracked (model_params.h). Training normalizes with the batch
// statistics and updates the running ones (PyTorch's momentum rule, unbiased
// running variance); evaluation normalizes with the running statistics.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compute/batch_norm_ops.h"
#include "compute/kernel_math.h"
#include "model/layer_families.h"

namespace ferry {
namespace {

class BatchNormLayer final : public Layer {
 public:
  BatchNormLayer(const LayerDef& def, const SampleShape& in) {
    shape_.channels = static_cast<int>(in[0]);
    shape_.spatial = in.size() == 3 ? static_cast<int>(in[1] * in[2]) : 1;
    shape_.eps = static_cast<float>(def.eps);
    shape_.momentum = static_cast<float>(def.momentum);
  }

  absl::Status Reserve(ComputeBackend* backend, int /*batch*/) override {
    if (!save_mean_.empty()) return absl::OkStatus();
    ASSIGN_OR_RETURN(save_mean_, backend->Allocate(shape_.channels));
    ASSIGN_OR_RETURN(save_invstd_, backend->Allocate(shape_.channels));
    return absl::OkStatus();
  }

  absl::Status Forward(const LayerContext& ctx, const float* params,
                       float* state, const float* x, float* y) override {
    ASSIGN_OR_RETURN(BatchNormOps * bn,
                     ctx.backend->LayerOpsOf<BatchNormOps>());
    BatchNormShape s = Shape(ctx);
    const float* gamma = params;
    const float* beta = params + s.channels;
    float* running_mean = state;
    float* running_var = state + s.channels;
    if (!ctx.training) {
      return bn->BatchNormForwardEval(s, x, gamma, beta, running_mean,
                                      running_var, y);
    }
    return bn->BatchNormForwardTrain(s, x, gamma, beta, running_mean,
                                     running_var, state + 2 * s.channels,
                                     save_mean_.data(), save_invstd_.data(), y);
  }

  absl::Status Backward(const LayerContext& ctx, const float* params,
                        const float* x, const float* /*y*/, const float* dy,
                        float* dx, float* dparams) override {
    ASSIGN_OR_RETURN(BatchNormOps * bn,
                     ctx.backend->LayerOpsOf<BatchNormOps>());
    BatchNormShape s = Shape(ctx);
    return bn->BatchNormBackward(s, x, dy, params, save_mean_.data(),
                                 save_invstd_.data(), dx, dparams,
                                 dparams + s.channels);
  }

 private:
  BatchNormShape Shape(const LayerContext& ctx) const {
    BatchNormShape s = shape_;
    s.n = ctx.batch;
    return s;
  }

  BatchNormShape shape_;
  DeviceBuffer save_mean_;
  DeviceBuffer save_invstd_;
};

absl::Status ParseBatchNorm(LayerArgReader& r, LayerDef& d) {
  ASSIGN_OR_RETURN(d.num_features, r.Int("num_features", true, 0));
  ASSIGN_OR_RETURN(d.eps, r.Number("eps", 1e-5, 1e-30, 1.0, false));
  ASSIGN_OR_RETURN(d.momentum, r.Number("momentum", 0.1, 0.0, 1.0, false));
  RETURN_IF_ERROR(r.OnlyDefault("affine", true));
  RETURN_IF_ERROR(r.OnlyDefault("track_running_stats", true));
  return absl::OkStatus();
}

void WriteBatchNorm(const LayerDef& d, LayerArgWriter& w) {
  w.Int("num_features", d.num_features);
  w.Number("eps", d.eps);
  w.Number("momentum", d.momentum);
}

// kRank 3: BatchNorm2d on [C, H, W]; 1: BatchNorm1d on [F].
template <size_t kRank>
absl::StatusOr<SampleShape> BatchNormOutput(const LayerDef& d,
                                            const SampleShape& in) {
  if (!IsValidDim(d.num_features)) {
    return absl::InvalidArgumentError("num_features must be > 0");
  }
  if (!(d.eps > 0.0) || !std::isfinite(d.eps) || !(d.momentum >= 0.0) ||
      !(d.momentum <= 1.0)) {
    return absl::InvalidArgumentError("needs eps > 0 and momentum in [0, 1]");
  }
  if (in.size() != kRank) {
    return absl::InvalidArgumentError(
        absl::StrCat("needs a ", kRank == 3 ? "[C, H, W]" : "[F]",
                     " input, got ", ShapeString(in)));
  }
  if (in[0] != d.num_features) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_features is ", d.num_features, " but its input has ",
                     in[0], kRank == 3 ? " channels" : " features"));
  }
  return in;
}

// torch's BatchNorm: weight (gamma, 1) and bias (beta, 0), [C] each.
std::vector<LayerTensor> BatchNormParams(const LayerDef& d) {
  return {{{"weight", {d.num_features}}, TensorInit::kOnes},
          {{"bias", {d.num_features}}}};
}

// running_mean 0, running_var 1 ([C]), num_batches_tracked 0 ([]).
std::vector<LayerTensor> BatchNormState(const LayerDef& d) {
  return {{{"running_mean", {d.num_features}}},
          {{"running_var", {d.num_features}}, TensorInit::kOnes},
          {{"num_batches_tracked", {}}}};
}

template <size_t kRank>
absl::StatusOr<std::unique_ptr<Layer>> MakeBatchNorm(const LayerDef& def,
                                                     int index,
                                                     const SampleShape& in,
                                                     const SampleShape& out) {
  if (in.size() != kRank) {
    return RefuseLayerShapes(def, index, in, out,
                             kRank == 3 ? "[C, H, W]" : "[F]");
  }
  return std::make_unique<BatchNormLayer>(def, in);
}

}  // namespace

const LayerKind kBatchNorm2dKind = {
    .name = "BatchNorm2d",
    .parse_args = &ParseBatchNorm,
    .write_args = &WriteBatchNorm,
    .output_shape = &BatchNormOutput<3>,
    .params = &BatchNormParams,
    .state = &BatchNormState,
    .activation = ActivationRole::kTransparent,
    .make = &MakeBatchNorm<3>,
};

const LayerKind kBatchNorm1dKind = {
    .name = "BatchNorm1d",
    .parse_args = &ParseBatchNorm,
    .write_args = &WriteBatchNorm,
    .output_shape = &BatchNormOutput<1>,
    .params = &BatchNormParams,
    .state = &BatchNormState,
    .activation = ActivationRole::kTransparent,
    .make = &MakeBatchNorm<1>,
};

}  // namespace ferry

// BatchNorm1d ([N, F]) and BatchNorm2d ([N, C, H, W]): parameters weight
// (gamma) and bias (beta), state running_mean, running_var,
// num_batches_tracked (model_params.h). Training normalizes with the batch
// statistics and updates the running ones (PyTorch's momentum rule, unbiased
// running variance); evaluation normalizes with the running statistics.
#include "common/status_macros.h"
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
    BatchNormShape s = Shape(ctx);
    const float* gamma = params;
    const float* beta = params + s.channels;
    float* running_mean = state;
    float* running_var = state + s.channels;
    if (!ctx.training) {
      return ctx.backend->BatchNormForwardEval(s, x, gamma, beta, running_mean,
                                               running_var, y);
    }
    return ctx.backend->BatchNormForwardTrain(
        s, x, gamma, beta, running_mean, running_var, state + 2 * s.channels,
        save_mean_.data(), save_invstd_.data(), y);
  }

  absl::Status Backward(const LayerContext& ctx, const float* params,
                        const float* x, const float* /*y*/, const float* dy,
                        float* dx, float* dparams) override {
    BatchNormShape s = Shape(ctx);
    return ctx.backend->BatchNormBackward(s, x, dy, params, save_mean_.data(),
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

}  // namespace

std::unique_ptr<Layer> MakeBatchNormLayer(const LayerDef& def,
                                          const SampleShape& in) {
  return std::make_unique<BatchNormLayer>(def, in);
}

}  // namespace ferry

#include "model/sequential_model.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/layer_stack.h"
#include "model/model_params.h"

namespace ferry {
namespace {

// Times one layer call into SequentialModel::LayerTimes (a no-op without
// one): synchronizes the backend at construction and in Add().
class LayerTimer {
 public:
  LayerTimer(SequentialModel::LayerTimes* times, ComputeBackend* backend)
      : times_(times), backend_(backend) {
    if (times_ != nullptr) {
      sync_ = backend_->Synchronize();
      start_ = std::chrono::steady_clock::now();
    }
  }
  absl::Status Add(size_t layer, bool backward) {
    if (times_ == nullptr) return absl::OkStatus();
    RETURN_IF_ERROR(sync_);
    RETURN_IF_ERROR(backend_->Synchronize());
    std::vector<double>& v =
        backward ? times_->backward_seconds : times_->forward_seconds;
    if (v.size() <= layer) v.resize(layer + 1, 0.0);
    v[layer] +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
            .count();
    return absl::OkStatus();
  }

 private:
  SequentialModel::LayerTimes* times_;
  ComputeBackend* backend_;
  absl::Status sync_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

absl::StatusOr<SequentialModel> SequentialModel::Create(
    const ModelDef& def, ComputeBackend* backend) {
  SequentialModel m(backend);
  m.def_ = def;
  ASSIGN_OR_RETURN(m.layout_, ModelParameterLayout(def));
  ASSIGN_OR_RETURN(m.state_layout_, ModelStateLayout(def));
  ASSIGN_OR_RETURN(m.shapes_, InferShapes(def));
  m.input_dim_ = static_cast<int>(ShapeElements(def.input.shape));
  ASSIGN_OR_RETURN(LayerStack stack,
                   BuildLayerStack(def, m.shapes_, m.layout_, m.state_layout_,
                                   0, static_cast<int>(def.layers.size())));
  m.layers_ = std::move(stack.layers);
  m.slots_ = std::move(stack.slots);
  m.first_param_layer_ = stack.first_param_layer;
  ASSIGN_OR_RETURN(m.state_,
                   backend->Allocate(m.state_layout_.total_elements()));
  RETURN_IF_ERROR(m.SetState(m.InitialState()));
  return m;
}

std::vector<float> SequentialModel::InitialParameters(uint64_t seed) const {
  return ModelInitialParameters(def_, layout_, seed);
}

std::vector<float> SequentialModel::InitialState() const {
  return ModelInitialState(def_, state_layout_);
}

absl::Status SequentialModel::SetState(const std::vector<float>& host) {
  if (static_cast<int64_t>(host.size()) != state_layout_.total_elements()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model state has ", state_layout_.total_elements(),
                     " elements, got ", host.size()));
  }
  return backend_->CopyToDevice(host.data(), host.size(), state_.data());
}

absl::StatusOr<std::vector<float>> SequentialModel::GetState() {
  std::vector<float> host(state_layout_.total_elements());
  RETURN_IF_ERROR(
      backend_->CopyToHost(state_.data(), host.size(), host.data()));
  return host;
}

absl::Status SequentialModel::EnsureWorkspace(int batch) {
  if (batch <= workspace_batch_) return absl::OkStatus();
  activations_.clear();
  outputs_.assign(layers_.size(), nullptr);
  int64_t widest = def_.classes;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const int64_t size = ShapeElements(shapes_[i]);
    widest = std::max(widest, size);
    DeviceBuffer a;
    if (!layers_[i]->IsView()) {
      ASSIGN_OR_RETURN(a,
                       backend_->Allocate(static_cast<size_t>(batch) * size));
    }
    activations_.push_back(std::move(a));
    RETURN_IF_ERROR(layers_[i]->Reserve(backend_, batch));
  }
  ASSIGN_OR_RETURN(delta_a_,
                   backend_->Allocate(static_cast<size_t>(batch) * widest));
  ASSIGN_OR_RETURN(delta_b_,
                   backend_->Allocate(static_cast<size_t>(batch) * widest));
  workspace_batch_ = batch;
  return absl::OkStatus();
}

absl::Status SequentialModel::Forward(const LayerContext& ctx,
                                      const float* params,
                                      const float* inputs) {
  if (ctx.batch <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch must be > 0, got ", ctx.batch));
  }
  RETURN_IF_ERROR(EnsureWorkspace(ctx.batch));
  const float* x = inputs;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (layers_[i]->IsView()) {
      outputs_[i] = x;
      continue;
    }
    const LayerSlot& slot = slots_[i];
    float* y = activations_[i].data();
    LayerTimer timer(ctx.training ? layer_times_ : nullptr, backend_);
    RETURN_IF_ERROR(layers_[i]->Forward(
        ctx, slot.param_count > 0 ? params + slot.param_offset : nullptr,
        slot.has_state ? state_.data() + slot.state_offset : nullptr, x, y));
    RETURN_IF_ERROR(timer.Add(i, /*backward=*/false));
    outputs_[i] = y;
    x = y;
  }
  return absl::OkStatus();
}

absl::StatusOr<LossStats> SequentialModel::ForwardBackward(
    const float* params, const float* inputs, const int32_t* labels, int batch,
    float grad_scale, float* grads, const GradReadyFn& on_ready,
    const StepContext& context) {
  LayerContext ctx;
  ctx.backend = backend_;
  ctx.batch = batch;
  ctx.training = true;
  ctx.seed = context.seed;
  ctx.step = context.step;
  ctx.first_sample = context.first_sample;
  RETURN_IF_ERROR(Forward(ctx, params, inputs));
  float* delta = delta_a_.data();
  ASSIGN_OR_RETURN(LossStats stats, backend_->SoftmaxCrossEntropy(
                                        batch, num_classes(), outputs_.back(),
                                        labels, grad_scale, delta));
  for (int i = static_cast<int>(layers_.size()) - 1; i >= 0; --i) {
    Layer& layer = *layers_[i];
    if (layer.IsView()) continue;  // the gradient passes through unchanged
    const LayerSlot& slot = slots_[i];
    const float* x = i == 0 ? inputs : outputs_[i - 1];
    float* dx = nullptr;
    if (i > first_param_layer_) {
      dx = delta == delta_a_.data() ? delta_b_.data() : delta_a_.data();
    }
    LayerTimer timer(layer_times_, backend_);
    RETURN_IF_ERROR(layer.Backward(
        ctx, slot.param_count > 0 ? params + slot.param_offset : nullptr, x,
        outputs_[i], delta, dx,
        slot.param_count > 0 ? grads + slot.param_offset : nullptr));
    RETURN_IF_ERROR(timer.Add(i, /*backward=*/true));
    if (slot.param_count > 0 && on_ready) {
      on_ready(slot.param_offset, slot.param_count);
    }
    if (dx == nullptr) break;
    delta = dx;
  }
  return stats;
}

absl::StatusOr<LossStats> SequentialModel::Evaluate(const float* params,
                                                    const float* inputs,
                                                    const int32_t* labels,
                                                    int batch) {
  LayerContext ctx;
  ctx.backend = backend_;
  ctx.batch = batch;
  ctx.training = false;
  RETURN_IF_ERROR(Forward(ctx, params, inputs));
  return backend_->SoftmaxCrossEntropy(batch, num_classes(), outputs_.back(),
                                       labels, 0.0f, nullptr);
}

}  // namespace ferry

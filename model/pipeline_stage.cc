#include "model/pipeline_stage.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/model_params.h"

namespace ferry {

absl::StatusOr<PipelineStage> PipelineStage::Create(const ModelDef& def,
                                                    StageRange range,
                                                    ComputeBackend* backend) {
  PipelineStage stage(backend);
  stage.def_ = def;
  ASSIGN_OR_RETURN(stage.layout_, ModelParameterLayout(def));
  ASSIGN_OR_RETURN(stage.state_layout_, ModelStateLayout(def));
  ASSIGN_OR_RETURN(stage.shapes_, InferShapes(def));
  ASSIGN_OR_RETURN(
      stage.stack_,
      BuildLayerStack(def, stage.shapes_, stage.layout_, stage.state_layout_,
                      range.first_layer, range.end_layer));
  stage.range_ = range;
  stage.is_last_ = range.end_layer == static_cast<int>(def.layers.size());
  stage.classes_ = def.classes;
  stage.input_elements_ =
      range.first_layer == 0
          ? ShapeElements(def.input.shape)
          : ShapeElements(stage.shapes_[range.first_layer - 1]);
  stage.output_elements_ = ShapeElements(stage.shapes_[range.end_layer - 1]);
  stage.widest_ = stage.input_elements_;
  for (int i = range.first_layer; i < range.end_layer; ++i) {
    stage.widest_ = std::max(stage.widest_, ShapeElements(stage.shapes_[i]));
  }
  ASSIGN_OR_RETURN(stage.state_, backend->Allocate(stage.state_count()));
  const std::vector<float> initial =
      ModelInitialState(def, stage.state_layout_);
  RETURN_IF_ERROR(stage.SetState(absl::MakeConstSpan(initial).subspan(
      stage.state_offset(), stage.state_count())));
  return stage;
}

absl::Status PipelineStage::SetState(absl::Span<const float> host) {
  if (static_cast<int64_t>(host.size()) != state_count()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stage state has ", state_count(), " elements, got ", host.size()));
  }
  if (host.empty()) return absl::OkStatus();
  return backend_->CopyToDevice(host.data(), host.size(), state_.data());
}

absl::StatusOr<std::vector<float>> PipelineStage::GetState() {
  std::vector<float> host(state_count());
  if (!host.empty()) {
    RETURN_IF_ERROR(
        backend_->CopyToHost(state_.data(), host.size(), host.data()));
  }
  return host;
}

absl::Status PipelineStage::EnsureSlot(int slot, int batch) {
  if (slot < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("activation slot must be >= 0, got ", slot));
  }
  if (batch <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch must be > 0, got ", batch));
  }
  if (slot >= static_cast<int>(slots_.size())) slots_.resize(slot + 1);
  Slot& s = slots_[slot];
  if (batch <= s.capacity) return absl::OkStatus();
  if (s.layers.empty() && !stack_.layers.empty()) {
    s.layers = std::exchange(stack_.layers, {});  // the first slot's
  } else if (s.layers.empty()) {
    ASSIGN_OR_RETURN(LayerStack own,
                     BuildLayerStack(def_, shapes_, layout_, state_layout_,
                                     range_.first_layer, range_.end_layer));
    s.layers = std::move(own.layers);
  }
  const size_t b = static_cast<size_t>(batch);
  ASSIGN_OR_RETURN(s.input, backend_->Allocate(b * input_elements_));
  s.activations.clear();
  s.outputs.assign(s.layers.size(), nullptr);
  for (size_t i = 0; i < s.layers.size(); ++i) {
    DeviceBuffer a;
    if (!s.layers[i]->IsView()) {
      ASSIGN_OR_RETURN(a,
                       backend_->Allocate(
                           b * ShapeElements(shapes_[range_.first_layer + i])));
    }
    s.activations.push_back(std::move(a));
    RETURN_IF_ERROR(s.layers[i]->Reserve(backend_, batch));
  }
  ASSIGN_OR_RETURN(s.output_grad, backend_->Allocate(b * output_elements_));
  if (!is_first()) {
    ASSIGN_OR_RETURN(s.input_grad, backend_->Allocate(b * input_elements_));
  }
  s.capacity = batch;
  if (batch > delta_capacity_) {
    ASSIGN_OR_RETURN(delta_a_, backend_->Allocate(b * widest_));
    ASSIGN_OR_RETURN(delta_b_, backend_->Allocate(b * widest_));
    delta_capacity_ = batch;
  }
  return absl::OkStatus();
}

absl::StatusOr<PipelineStage::Slot*> PipelineStage::UsedSlot(int slot) {
  if (slot < 0 || slot >= static_cast<int>(slots_.size()) ||
      slots_[slot].batch == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("activation slot ", slot, " has no input"));
  }
  return &slots_[slot];
}

LayerContext PipelineStage::Context(const Slot& s, bool training) const {
  LayerContext ctx;
  ctx.backend = backend_;
  ctx.batch = s.batch;
  ctx.training = training;
  ctx.seed = s.context.seed;
  ctx.step = s.context.step;
  ctx.first_sample = s.context.first_sample;
  return ctx;
}

absl::Status PipelineStage::SetInput(int slot, int batch,
                                     absl::Span<const float> host) {
  if (batch > 0 &&
      static_cast<int64_t>(host.size()) != batch * input_elements_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stage ", StageRangesString({&range_, 1}), " input: expected ", batch,
        " x ", input_elements_, " values, got ", host.size()));
  }
  RETURN_IF_ERROR(EnsureSlot(slot, batch));
  Slot& s = slots_[slot];
  s.batch = batch;
  return backend_->CopyToDevice(host.data(), host.size(), s.input.data());
}

absl::Status PipelineStage::Forward(int slot, const float* params,
                                    const StepContext& context) {
  ASSIGN_OR_RETURN(Slot * s, UsedSlot(slot));
  s->context = context;
  return RunForward(*s, params, /*training=*/true);
}

absl::Status PipelineStage::ForwardEval(int slot, const float* params) {
  ASSIGN_OR_RETURN(Slot * s, UsedSlot(slot));
  s->context = StepContext{};
  return RunForward(*s, params, /*training=*/false);
}

absl::Status PipelineStage::RunForward(Slot& s, const float* params,
                                       bool training) {
  const LayerContext ctx = Context(s, training);
  const float* x = s.input.data();
  for (size_t i = 0; i < s.layers.size(); ++i) {
    if (s.layers[i]->IsView()) {
      s.outputs[i] = x;
      continue;
    }
    const LayerSlot& ls = stack_.slots[i];
    float* y = s.activations[i].data();
    RETURN_IF_ERROR(s.layers[i]->Forward(
        ctx, ls.param_count > 0 ? params + ls.param_offset : nullptr,
        ls.has_state ? state_.data() + ls.state_offset : nullptr, x, y));
    s.outputs[i] = y;
    x = y;
  }
  return absl::OkStatus();
}

absl::Status PipelineStage::CopyOutput(int slot, std::vector<float>& host) {
  ASSIGN_OR_RETURN(Slot * s, UsedSlot(slot));
  host.resize(static_cast<size_t>(s->batch) * output_elements_);
  return backend_->CopyToHost(s->outputs.back(), host.size(), host.data());
}

absl::StatusOr<LossStats> PipelineStage::Loss(int slot, const int32_t* labels,
                                              float grad_scale) {
  if (!is_last()) {
    return absl::FailedPreconditionError(
        "only the last pipeline stage computes the loss");
  }
  ASSIGN_OR_RETURN(Slot * s, UsedSlot(slot));
  return backend_->SoftmaxCrossEntropy(s->batch, static_cast<int>(classes_),
                                       s->outputs.back(), labels, grad_scale,
                                       s->output_grad.data());
}

absl::StatusOr<LossStats> PipelineStage::EvalLoss(int slot,
                                                  const int32_t* labels) {
  if (!is_last()) {
    return absl::FailedPreconditionError(
        "only the last pipeline stage computes the loss");
  }
  ASSIGN_OR_RETURN(Slot * s, UsedSlot(slot));
  return backend_->SoftmaxCrossEntropy(s->batch, static_cast<int>(classes_),
                                       s->outputs.back(), labels, 0.0f,
                                       nullptr);
}

absl::Status PipelineStage::SetOutputGradient(int slot,
                                              absl::Span<const float> host) {
  ASSIGN_OR_RETURN(Slot * s, UsedSlot(slot));
  if (static_cast<int64_t>(host.size()) != s->batch * output_elements_) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage ", StageRangesString({&range_, 1}),
                     " output gradient: ", "expected ", s->batch, " x ",
                     output_elements_, " values, got ", host.size()));
  }
  return backend_->CopyToDevice(host.data(), host.size(),
                                s->output_grad.data());
}

absl::Status PipelineStage::Backward(int slot, const float* params,
                                     float* grads, bool accumulate) {
  ASSIGN_OR_RETURN(Slot * s, UsedSlot(slot));
  // Accumulating, each layer's gradient goes to the scratch first and is
  // added to its range of `grads` (the scratch holds the largest layer's).
  const int64_t largest = stack_.LargestLayerParams();
  if (accumulate && scratch_grads_.size() < static_cast<size_t>(largest)) {
    ASSIGN_OR_RETURN(scratch_grads_, backend_->Allocate(largest));
  }
  const LayerContext ctx = Context(*s, /*training=*/true);
  const float* delta = s->output_grad.data();
  const int first_with_input_grad = is_first() ? stack_.first_param_layer : -1;
  for (int i = static_cast<int>(s->layers.size()) - 1; i >= 0; --i) {
    Layer& layer = *s->layers[i];
    if (layer.IsView()) continue;  // the gradient passes through unchanged
    const LayerSlot& ls = stack_.slots[i];
    const float* x = i == 0 ? s->input.data() : s->outputs[i - 1];
    float* dx = nullptr;
    if (i > first_with_input_grad) {
      dx = i == 0
               ? s->input_grad.data()
               : (delta == delta_a_.data() ? delta_b_.data() : delta_a_.data());
    }
    float* layer_grads = nullptr;
    if (ls.param_count > 0) {
      layer_grads =
          accumulate ? scratch_grads_.data() : grads + ls.param_offset;
    }
    RETURN_IF_ERROR(layer.Backward(
        ctx, ls.param_count > 0 ? params + ls.param_offset : nullptr, x,
        s->outputs[i], delta, dx, layer_grads));
    if (accumulate && ls.param_count > 0) {
      RETURN_IF_ERROR(backend_->Axpy(ls.param_count, 1.0f,
                                     scratch_grads_.data(),
                                     grads + ls.param_offset));
    }
    if (dx == nullptr) break;
    delta = dx;
  }
  if (!is_first() && s->layers.front()->IsView()) {
    // A leading view passes its output gradient on as the input gradient.
    RETURN_IF_ERROR(backend_->Copy(delta, s->batch * input_elements_,
                                   s->input_grad.data()));
  }
  return absl::OkStatus();
}

absl::Status PipelineStage::CopyInputGradient(int slot,
                                              std::vector<float>& host) {
  if (is_first()) {
    return absl::FailedPreconditionError(
        "the first pipeline stage has no input gradient");
  }
  ASSIGN_OR_RETURN(Slot * s, UsedSlot(slot));
  host.resize(static_cast<size_t>(s->batch) * input_elements_);
  return backend_->CopyToHost(s->input_grad.data(), host.size(), host.data());
}

int64_t PipelineStage::activation_bytes() const {
  int64_t bytes = 0;
  for (const Slot& s : slots_) {
    bytes += s.input.size() + s.output_grad.size() + s.input_grad.size();
    for (const DeviceBuffer& a : s.activations) bytes += a.size();
  }
  return 4 * bytes;
}

}  // namespace ferry

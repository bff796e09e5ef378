#include "model/mlp.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ferry {

absl::StatusOr<Mlp> Mlp::Create(const std::vector<int>& sizes,
                                ComputeBackend* backend) {
  ASSIGN_OR_RETURN(ParameterLayout layout, MlpLayout(sizes));
  return Mlp(sizes, std::move(layout), backend);
}

std::vector<float> Mlp::InitialParameters(uint64_t seed) const {
  return MlpInitialParameters(sizes_, layout_, seed);
}

absl::Status Mlp::EnsureWorkspace(int batch) {
  if (batch <= workspace_batch_) return absl::OkStatus();
  activations_.clear();
  const int widest = *std::max_element(sizes_.begin(), sizes_.end());
  for (int l = 0; l < num_layers(); ++l) {
    ASSIGN_OR_RETURN(
        DeviceBuffer a,
        backend_->Allocate(static_cast<size_t>(batch) * sizes_[l + 1]));
    activations_.push_back(std::move(a));
  }
  ASSIGN_OR_RETURN(delta_a_,
                   backend_->Allocate(static_cast<size_t>(batch) * widest));
  ASSIGN_OR_RETURN(delta_b_,
                   backend_->Allocate(static_cast<size_t>(batch) * widest));
  workspace_batch_ = batch;
  return absl::OkStatus();
}

absl::Status Mlp::Forward(const float* params, const float* inputs, int batch) {
  if (batch <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch must be > 0, got ", batch));
  }
  RETURN_IF_ERROR(EnsureWorkspace(batch));
  const float* x = inputs;
  for (int l = 0; l < num_layers(); ++l) {
    const int in = sizes_[l];
    const int out = sizes_[l + 1];
    const float* w = params + layout_.tensors()[2 * l].offset;
    const float* b = params + layout_.tensors()[2 * l + 1].offset;
    float* y = activations_[l].data();
    // y[batch, out] = x[batch, in] * w[out, in]^T + b
    RETURN_IF_ERROR(backend_->Gemm(Transpose::kNo, Transpose::kYes, batch, out,
                                   in, 1.0f, x, in, w, in, 0.0f, y, out));
    RETURN_IF_ERROR(backend_->AddBias(batch, out, b, y));
    if (l + 1 < num_layers()) {
      RETURN_IF_ERROR(backend_->Relu(static_cast<size_t>(batch) * out, y, y));
    }
    x = y;
  }
  return absl::OkStatus();
}

absl::StatusOr<LossStats> Mlp::ForwardBackward(const float* params,
                                               const float* inputs,
                                               const int32_t* labels, int batch,
                                               float grad_scale, float* grads,
                                               const GradReadyFn& on_ready) {
  RETURN_IF_ERROR(Forward(params, inputs, batch));
  float* delta = delta_a_.data();
  float* next_delta = delta_b_.data();
  ASSIGN_OR_RETURN(LossStats stats,
                   backend_->SoftmaxCrossEntropy(batch, num_classes(),
                                                 activations_.back().data(),
                                                 labels, grad_scale, delta));
  for (int l = num_layers() - 1; l >= 0; --l) {
    const int in = sizes_[l];
    const int out = sizes_[l + 1];
    const TensorSlot& w_slot = layout_.tensors()[2 * l];
    const TensorSlot& b_slot = layout_.tensors()[2 * l + 1];
    const float* x = l == 0 ? inputs : activations_[l - 1].data();
    // dW[out, in] = delta[batch, out]^T * x[batch, in]; db = column sums.
    RETURN_IF_ERROR(backend_->Gemm(Transpose::kYes, Transpose::kNo, out, in,
                                   batch, 1.0f, delta, out, x, in, 0.0f,
                                   grads + w_slot.offset, in));
    RETURN_IF_ERROR(
        backend_->BiasGrad(batch, out, delta, grads + b_slot.offset));
    if (l > 0) {
      // dx[batch, in] = delta[batch, out] * W[out, in], then through ReLU.
      RETURN_IF_ERROR(backend_->Gemm(
          Transpose::kNo, Transpose::kNo, batch, in, out, 1.0f, delta, out,
          params + w_slot.offset, in, 0.0f, next_delta, in));
      RETURN_IF_ERROR(backend_->ReluBackward(static_cast<size_t>(batch) * in,
                                             activations_[l - 1].data(),
                                             next_delta, next_delta));
      std::swap(delta, next_delta);
    }
    if (on_ready) on_ready(w_slot.offset, w_slot.numel + b_slot.numel);
  }
  return stats;
}

absl::StatusOr<LossStats> Mlp::Evaluate(const float* params,
                                        const float* inputs,
                                        const int32_t* labels, int batch) {
  RETURN_IF_ERROR(Forward(params, inputs, batch));
  return backend_->SoftmaxCrossEntropy(
      batch, num_classes(), activations_.back().data(), labels, 0.0f, nullptr);
}

}  // namespace ferry

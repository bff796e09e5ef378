// A multi-layer perceptron with ReLU hidden layers and a softmax
// cross-entropy head, computed on a ComputeBackend.
//
// Parameters live in one flat buffer laid out by layout(): for each layer l,
// "fc<l>.weight" [out, in] then "fc<l>.bias" [out]. Layer l's weight and bias
// are therefore one contiguous range of the flat buffer, which is what
// ForwardBackward() reports through its gradient-ready callback.
//
// Thread safety: one thread at a time (it owns activation workspaces).
#ifndef FERRY_MODEL_MLP_H_
#define FERRY_MODEL_MLP_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compute/compute_backend.h"
#include "model/model_spec.h"
#include "model/parameter_layout.h"

namespace ferry {

class Mlp {
 public:
  // Called when the gradient of a flat range [offset, offset + length) is
  // final, in reverse layer order. The gradient is queued on the backend's
  // stream; a consumer that reads it on the host must synchronize first.
  using GradReadyFn = std::function<void(int64_t offset, int64_t length)>;

  // `backend` must outlive the model. INVALID_ARGUMENT on a bad spec.
  static absl::StatusOr<Mlp> Create(const std::vector<int>& sizes,
                                    ComputeBackend* backend);

  const ParameterLayout& layout() const { return layout_; }
  const std::vector<int>& sizes() const { return sizes_; }
  int input_dim() const { return sizes_.front(); }
  int num_classes() const { return sizes_.back(); }

  // Deterministic initial parameters on the host: He-normal weights for
  // ReLU layers, Xavier-normal for the last layer, zero biases. The same
  // seed gives bit-identical parameters on every process.
  std::vector<float> InitialParameters(uint64_t seed) const;

  // Forward and backward over a batch. `params`, `inputs` [batch, in] and
  // `grads` are backend buffers; labels are on the host. Gradients are
  // grad_scale * d(sum of losses)/d(params), written over `grads`.
  absl::StatusOr<LossStats> ForwardBackward(const float* params,
                                            const float* inputs,
                                            const int32_t* labels, int batch,
                                            float grad_scale, float* grads,
                                            const GradReadyFn& on_ready = {});

  // Forward only; loss sum and correct count over the batch.
  absl::StatusOr<LossStats> Evaluate(const float* params, const float* inputs,
                                     const int32_t* labels, int batch);

 private:
  Mlp(std::vector<int> sizes, ParameterLayout layout, ComputeBackend* backend)
      : sizes_(std::move(sizes)),
        layout_(std::move(layout)),
        backend_(backend) {}

  absl::Status EnsureWorkspace(int batch);
  absl::Status Forward(const float* params, const float* inputs, int batch);
  int num_layers() const { return static_cast<int>(sizes_.size()) - 1; }

  std::vector<int> sizes_;
  ParameterLayout layout_;
  ComputeBackend* backend_;
  int workspace_batch_ = 0;
  std::vector<DeviceBuffer>
      activations_;  // [l] = output of layer l, [batch, sizes_[l+1]]
  DeviceBuffer delta_a_, delta_b_;  // backward scratch, [batch, max width]
};

}  // namespace ferry

#endif  // FERRY_MODEL_MLP_H_

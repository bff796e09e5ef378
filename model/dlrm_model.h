// The dense part of a DLRM-style CTR model (model/dlrm_spec.h) on a
// ComputeBackend: bottom MLP, pairwise dot-product interaction with the pooled
// embeddings, top MLP, sigmoid + binary cross-entropy. The embeddings come in
// already pooled ([batch, num_fields, embedding_dim], model/embedding_bag.h
// GatherPooled) and their gradient goes out the same way, so the model does
// not care where the rows live.
//
// Parameters live in one flat buffer laid out by layout() (DlrmParameterLayout:
// "bot_l.0.weight", ..., "top_l.<2k>.bias"); gradients use the same layout.
//
// Implementation: the Linear layers are the backend's Gemm + AddBias (+ Relu),
// as model/dense_layer.cc; the interaction is one Gemm per sample (the Gram
// matrix of its num_fields + 1 vectors) plus Copy calls that assemble the
// vectors and pick the strict lower triangle; the loss runs on the host over
// the batch's logits (compute/ctr_math.h), one [batch] copy each way.
// Workspaces are allocated when the batch capacity grows, never per step.
//
// Thread safety: one thread at a time (it owns its workspaces).
#ifndef FERRY_MODEL_DLRM_MODEL_H_
#define FERRY_MODEL_DLRM_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/compute_backend.h"
#include "model/dlrm_spec.h"
#include "model/parameter_layout.h"

namespace ferry {

class DlrmModel {
 public:
  // Validates `spec`. `backend` must outlive the model. INVALID_ARGUMENT for a
  // bad spec; RESOURCE_EXHAUSTED beyond the layout limits.
  static absl::StatusOr<DlrmModel> Create(const DlrmSpec& spec,
                                          ComputeBackend* backend);

  DlrmModel(DlrmModel&&) = default;
  DlrmModel& operator=(DlrmModel&&) = default;

  const DlrmSpec& spec() const { return spec_; }
  const ParameterLayout& layout() const { return layout_; }
  // Floats per sample of each input.
  int dense_dim() const { return spec_.dense_features; }
  int pooled_dim() const { return spec_.num_fields * spec_.embedding_dim; }
  // Inputs of the top MLP (DlrmInteractionFeatures).
  int interaction_features() const { return top_sizes_.front(); }

  // DlrmInitialParameters(spec(), layout(), seed).
  std::vector<float> InitialParameters(uint64_t seed) const;

  // Training pass over `batch` samples. `params`, `dense` [batch,
  // dense_dim()], `pooled` [batch, num_fields, embedding_dim], `grads`
  // (layout().total_elements()) and `d_pooled` (as `pooled`) are backend
  // buffers; `labels` [batch] is host memory, each in [0, 1] (clicks are 0 or
  // 1). Writes over `grads` grad_scale * d(sum of losses)/d(params) and, when
  // `d_pooled` is non-null, grad_scale * d(sum of losses)/d(pooled). Returns
  // the sum over the batch of the binary cross-entropy of sigmoid(logit)
  // (from the logit, stable for any finite logit).
  // INVALID_ARGUMENT (nothing written) for batch <= 0, a null buffer (other
  // than d_pooled) or a label outside [0, 1].
  absl::StatusOr<double> ForwardBackward(const float* params,
                                         const float* dense,
                                         const float* pooled,
                                         const float* labels, int batch,
                                         float grad_scale, float* grads,
                                         float* d_pooled);

  // Evaluation pass: writes sigmoid(logit) for each of the `batch` samples to
  // `probabilities` (host memory, [batch]). Other buffers as above.
  // INVALID_ARGUMENT for batch <= 0 or a null buffer.
  absl::Status Predict(const float* params, const float* dense,
                       const float* pooled, int batch, float* probabilities);

  // Like Predict, but the logits (host memory, [batch]).
  absl::Status Logits(const float* params, const float* dense,
                      const float* pooled, int batch, float* logits);

 private:
  explicit DlrmModel(ComputeBackend* backend) : backend_(backend) {}

  struct Linear {
    int in = 0;
    int out = 0;
    int64_t offset = 0;  // weight [out, in], then bias [out]
    bool relu = false;
  };

  absl::Status EnsureWorkspace(int batch);
  absl::Status CheckArgs(const float* params, const float* dense,
                         const float* pooled, int batch) const;
  // Fills the activations, the logits last (top_act_.back()), and copies the
  // logits to logits_host_.
  absl::Status Forward(const float* params, const float* dense,
                       const float* pooled, int batch);
  absl::Status LinearForward(const Linear& l, const float* params,
                             const float* x, int batch, float* y);
  // dy may be overwritten (ReLU backward in place). dx may be null.
  absl::Status LinearBackward(const Linear& l, const float* params,
                              const float* x, const float* y, float* dy,
                              int batch, float* dx, float* grads);
  absl::Status InteractionBackward(const float* d_interaction, int batch,
                                   float* d_bottom, float* d_pooled);

  DlrmSpec spec_;
  ParameterLayout layout_;
  std::vector<int64_t> top_sizes_;
  ComputeBackend* backend_;
  std::vector<Linear> bottom_;
  std::vector<Linear> top_;
  int vectors_ = 0;  // num_fields + 1
  int workspace_batch_ = 0;
  std::vector<DeviceBuffer> bottom_act_;  // [l]: [batch, bottom_[l].out]
  std::vector<DeviceBuffer> top_act_;     // [l]: [batch, top_[l].out]
  DeviceBuffer z_;      // [batch, vectors, dim]: bottom output, then pooled
  DeviceBuffer gram_;   // [batch, vectors, vectors]: z z^T per sample
  DeviceBuffer inter_;  // [batch, interaction_features()]: top input
  DeviceBuffer delta_a_, delta_b_;  // [batch, widest layer]
  DeviceBuffer d_gram_;             // as gram_
  DeviceBuffer d_z_;                // as z_
  std::vector<float> logits_host_;  // [batch]
  std::vector<float> dlogits_host_;
};

}  // namespace ferry

#endif  // FERRY_MODEL_DLRM_MODEL_H_

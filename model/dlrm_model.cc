#include "model/dlrm_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compute/ctr_math.h"

namespace ferry {

absl::StatusOr<DlrmModel> DlrmModel::Create(const DlrmSpec& spec,
                                            ComputeBackend* backend) {
  if (backend == nullptr) {
    return absl::InvalidArgumentError("DlrmModel: null backend");
  }
  DlrmModel m(backend);
  m.spec_ = spec;
  ASSIGN_OR_RETURN(m.layout_, DlrmParameterLayout(spec));
  m.top_sizes_ = DlrmTopSizes(spec);
  m.vectors_ = spec.num_fields + 1;
  size_t tensor = 0;
  auto add = [&](const std::vector<int64_t>& sizes, bool relu_last,
                 std::vector<Linear>* layers) {
    for (size_t l = 0; l + 1 < sizes.size(); ++l) {
      Linear lin;
      lin.in = static_cast<int>(sizes[l]);
      lin.out = static_cast<int>(sizes[l + 1]);
      lin.offset = m.layout_.tensors()[tensor].offset;
      lin.relu = relu_last || l + 2 < sizes.size();
      layers->push_back(lin);
      tensor += 2;
    }
  };
  add(DlrmBottomSizes(spec), /*relu_last=*/true, &m.bottom_);
  add(m.top_sizes_, /*relu_last=*/false, &m.top_);
  return m;
}

std::vector<float> DlrmModel::InitialParameters(uint64_t seed) const {
  return DlrmInitialParameters(spec_, layout_, seed);
}

absl::Status DlrmModel::EnsureWorkspace(int batch) {
  if (batch <= workspace_batch_) return absl::OkStatus();
  const size_t n = static_cast<size_t>(batch);
  const size_t d = static_cast<size_t>(spec_.embedding_dim);
  const size_t v = static_cast<size_t>(vectors_);
  int64_t widest = interaction_features();
  bottom_act_.clear();
  top_act_.clear();
  for (const Linear& l : bottom_) {
    widest = std::max<int64_t>(widest, l.out);
    ASSIGN_OR_RETURN(DeviceBuffer a, backend_->Allocate(n * l.out));
    bottom_act_.push_back(std::move(a));
  }
  for (const Linear& l : top_) {
    widest = std::max<int64_t>(widest, l.out);
    ASSIGN_OR_RETURN(DeviceBuffer a, backend_->Allocate(n * l.out));
    top_act_.push_back(std::move(a));
  }
  ASSIGN_OR_RETURN(z_, backend_->Allocate(n * v * d));
  ASSIGN_OR_RETURN(gram_, backend_->Allocate(n * v * v));
  ASSIGN_OR_RETURN(inter_, backend_->Allocate(n * interaction_features()));
  ASSIGN_OR_RETURN(delta_a_, backend_->Allocate(n * widest));
  ASSIGN_OR_RETURN(delta_b_, backend_->Allocate(n * widest));
  // Zero-filled; InteractionBackward writes only the strict lower triangle,
  // so the rest stays 0.
  ASSIGN_OR_RETURN(d_gram_, backend_->Allocate(n * v * v));
  ASSIGN_OR_RETURN(d_z_, backend_->Allocate(n * v * d));
  logits_host_.assign(n, 0.0f);
  dlogits_host_.assign(n, 0.0f);
  workspace_batch_ = batch;
  return absl::OkStatus();
}

absl::Status DlrmModel::CheckArgs(const float* params, const float* dense,
                                  const float* pooled, int batch) const {
  if (batch <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("DlrmModel: batch must be > 0, got ", batch));
  }
  if (params == nullptr || dense == nullptr || pooled == nullptr) {
    return absl::InvalidArgumentError(
        "DlrmModel: params, dense and pooled must not be null");
  }
  return absl::OkStatus();
}

absl::Status DlrmModel::LinearForward(const Linear& l, const float* params,
                                      const float* x, int batch, float* y) {
  const float* w = params + l.offset;
  RETURN_IF_ERROR(backend_->Gemm(Transpose::kNo, Transpose::kYes, batch, l.out,
                                 l.in, 1.0f, x, l.in, w, l.in, 0.0f, y, l.out));
  RETURN_IF_ERROR(backend_->AddBias(batch, l.out,
                                    w + static_cast<size_t>(l.in) * l.out, y));
  if (l.relu) {
    RETURN_IF_ERROR(backend_->Relu(static_cast<size_t>(batch) * l.out, y, y));
  }
  return absl::OkStatus();
}

absl::Status DlrmModel::LinearBackward(const Linear& l, const float* params,
                                       const float* x, const float* y,
                                       float* dy, int batch, float* dx,
                                       float* grads) {
  if (l.relu) {
    RETURN_IF_ERROR(
        backend_->ReluBackward(static_cast<size_t>(batch) * l.out, y, dy, dy));
  }
  float* dw = grads + l.offset;
  // dW[out, in] = dy[N, out]^T x[N, in]; db = column sums of dy.
  RETURN_IF_ERROR(backend_->Gemm(Transpose::kYes, Transpose::kNo, l.out, l.in,
                                 batch, 1.0f, dy, l.out, x, l.in, 0.0f, dw,
                                 l.in));
  RETURN_IF_ERROR(backend_->BiasGrad(batch, l.out, dy,
                                     dw + static_cast<size_t>(l.in) * l.out));
  if (dx != nullptr) {
    // dx[N, in] = dy[N, out] W[out, in].
    RETURN_IF_ERROR(backend_->Gemm(Transpose::kNo, Transpose::kNo, batch, l.in,
                                   l.out, 1.0f, dy, l.out, params + l.offset,
                                   l.in, 0.0f, dx, l.in));
  }
  return absl::OkStatus();
}

absl::Status DlrmModel::Forward(const float* params, const float* dense,
                                const float* pooled, int batch) {
  RETURN_IF_ERROR(EnsureWorkspace(batch));
  const float* x = dense;
  for (size_t l = 0; l < bottom_.size(); ++l) {
    RETURN_IF_ERROR(
        LinearForward(bottom_[l], params, x, batch, bottom_act_[l].data()));
    x = bottom_act_[l].data();
  }
  // The interaction, per sample n: z_n = [bottom_n; pooled_n] ([V, d]),
  // gram_n = z_n z_n^T, inter_n = [bottom_n, gram_n's strict lower triangle
  // row by row].
  const int d = spec_.embedding_dim;
  const int v = vectors_;
  const size_t fd = static_cast<size_t>(spec_.num_fields) * d;
  const size_t zd = static_cast<size_t>(v) * d;
  const size_t vv = static_cast<size_t>(v) * v;
  const size_t r = static_cast<size_t>(interaction_features());
  for (size_t n = 0; n < static_cast<size_t>(batch); ++n) {
    float* z = z_.data() + n * zd;
    float* g = gram_.data() + n * vv;
    float* out = inter_.data() + n * r;
    RETURN_IF_ERROR(backend_->Copy(x + n * d, d, z));
    RETURN_IF_ERROR(backend_->Copy(pooled + n * fd, fd, z + d));
    RETURN_IF_ERROR(backend_->Gemm(Transpose::kNo, Transpose::kYes, v, v, d,
                                   1.0f, z, d, z, d, 0.0f, g, v));
    RETURN_IF_ERROR(backend_->Copy(x + n * d, d, out));
    for (int i = 1; i < v; ++i) {
      RETURN_IF_ERROR(backend_->Copy(g + static_cast<size_t>(i) * v, i,
                                     out + d + DotInteractionIndex(i, 0)));
    }
  }
  x = inter_.data();
  for (size_t l = 0; l < top_.size(); ++l) {
    RETURN_IF_ERROR(
        LinearForward(top_[l], params, x, batch, top_act_[l].data()));
    x = top_act_[l].data();
  }
  return backend_->CopyToHost(x, static_cast<size_t>(batch),
                              logits_host_.data());
}

absl::Status DlrmModel::InteractionBackward(const float* d_inter, int batch,
                                            float* d_bottom, float* d_pooled) {
  const int d = spec_.embedding_dim;
  const int v = vectors_;
  const size_t fd = static_cast<size_t>(spec_.num_fields) * d;
  const size_t zd = static_cast<size_t>(v) * d;
  const size_t vv = static_cast<size_t>(v) * v;
  const size_t r = static_cast<size_t>(interaction_features());
  RETURN_IF_ERROR(
      backend_->Fill(0.0f, static_cast<size_t>(batch) * zd, d_z_.data()));
  for (size_t n = 0; n < static_cast<size_t>(batch); ++n) {
    const float* din = d_inter + n * r;
    const float* z = z_.data() + n * zd;
    float* dg = d_gram_.data() + n * vv;
    float* dz = d_z_.data() + n * zd;
    // d gram: the strict lower triangle from d_inter (the rest is always 0);
    // gram = z z^T gives dz = (dg + dg^T) z, plus the bottom output's direct
    // path into row 0.
    for (int i = 1; i < v; ++i) {
      RETURN_IF_ERROR(backend_->Copy(din + d + DotInteractionIndex(i, 0), i,
                                     dg + static_cast<size_t>(i) * v));
    }
    RETURN_IF_ERROR(backend_->Copy(din, d, dz));
    RETURN_IF_ERROR(backend_->Gemm(Transpose::kNo, Transpose::kNo, v, d, v,
                                   1.0f, dg, v, z, d, 1.0f, dz, d));
    RETURN_IF_ERROR(backend_->Gemm(Transpose::kYes, Transpose::kNo, v, d, v,
                                   1.0f, dg, v, z, d, 1.0f, dz, d));
    RETURN_IF_ERROR(backend_->Copy(dz, d, d_bottom + n * d));
    if (d_pooled != nullptr) {
      RETURN_IF_ERROR(backend_->Copy(dz + d, fd, d_pooled + n * fd));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<double> DlrmModel::ForwardBackward(
    const float* params, const float* dense, const float* pooled,
    const float* labels, int batch, float grad_scale, float* grads,
    float* d_pooled) {
  RETURN_IF_ERROR(CheckArgs(params, dense, pooled, batch));
  if (labels == nullptr || grads == nullptr) {
    return absl::InvalidArgumentError(
        "DlrmModel: labels and grads must not be null");
  }
  for (int i = 0; i < batch; ++i) {
    if (!(labels[i] >= 0.0f && labels[i] <= 1.0f)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DlrmModel: label ", i, " is ", labels[i], ", must be in [0, 1]"));
    }
  }
  RETURN_IF_ERROR(Forward(params, dense, pooled, batch));
  double loss = 0.0;
  for (int i = 0; i < batch; ++i) {
    loss += BceWithLogit(logits_host_[i], labels[i]);
    dlogits_host_[i] =
        grad_scale * BceWithLogitGrad(logits_host_[i], labels[i]);
  }
  float* dy = delta_a_.data();
  float* spare = delta_b_.data();
  RETURN_IF_ERROR(backend_->CopyToDevice(dlogits_host_.data(),
                                         static_cast<size_t>(batch), dy));
  for (int l = static_cast<int>(top_.size()) - 1; l >= 0; --l) {
    const float* x = l == 0 ? inter_.data() : top_act_[l - 1].data();
    RETURN_IF_ERROR(LinearBackward(top_[l], params, x, top_act_[l].data(), dy,
                                   batch, spare, grads));
    std::swap(dy, spare);
  }
  // dy: d loss / d interaction output; spare is free.
  RETURN_IF_ERROR(InteractionBackward(dy, batch, spare, d_pooled));
  std::swap(dy, spare);
  for (int l = static_cast<int>(bottom_.size()) - 1; l >= 0; --l) {
    const float* x = l == 0 ? dense : bottom_act_[l - 1].data();
    RETURN_IF_ERROR(LinearBackward(bottom_[l], params, x, bottom_act_[l].data(),
                                   dy, batch, l == 0 ? nullptr : spare, grads));
    std::swap(dy, spare);
  }
  return loss;
}

absl::Status DlrmModel::Logits(const float* params, const float* dense,
                               const float* pooled, int batch, float* logits) {
  RETURN_IF_ERROR(CheckArgs(params, dense, pooled, batch));
  if (logits == nullptr) {
    return absl::InvalidArgumentError("DlrmModel: null output");
  }
  RETURN_IF_ERROR(Forward(params, dense, pooled, batch));
  std::copy_n(logits_host_.begin(), batch, logits);
  return absl::OkStatus();
}

absl::Status DlrmModel::Predict(const float* params, const float* dense,
                                const float* pooled, int batch,
                                float* probabilities) {
  RETURN_IF_ERROR(Logits(params, dense, pooled, batch, probabilities));
  for (int i = 0; i < batch; ++i) {
    probabilities[i] = StableSigmoid(probabilities[i]);
  }
  return absl::OkStatus();
}

}  // namespace ferry

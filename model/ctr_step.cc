#include "model/ctr_step.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ferry {

absl::StatusOr<CtrStep> CtrStep::Create(const DlrmSpec& spec,
                                        ComputeBackend* backend) {
  if (backend == nullptr) {
    return absl::InvalidArgumentError("CtrStep needs a compute backend");
  }
  ASSIGN_OR_RETURN(DlrmModel model, DlrmModel::Create(spec, backend));
  return CtrStep(std::move(model), backend);
}

absl::Status CtrStep::EnsureCapacity(int batch) {
  if (batch <= capacity_) return absl::OkStatus();
  const size_t pooled = static_cast<size_t>(batch) * model_.pooled_dim();
  ASSIGN_OR_RETURN(dense_dev_, backend_->Allocate(static_cast<size_t>(batch) *
                                                  model_.dense_dim()));
  ASSIGN_OR_RETURN(pooled_dev_, backend_->Allocate(pooled));
  ASSIGN_OR_RETURN(d_pooled_dev_, backend_->Allocate(pooled));
  capacity_ = batch;
  return absl::OkStatus();
}

absl::Status CtrStep::Prepare(const CtrBatch& batch, EmbeddingRowSource& rows) {
  const DlrmSpec& s = model_.spec();
  const int b = batch.batch;
  if (b <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a CTR step needs at least one sample, got ", b));
  }
  if (batch.num_fields != s.num_fields) {
    return absl::InvalidArgumentError(
        absl::StrCat("the batch has ", batch.num_fields,
                     " categorical fields, the model ", s.num_fields));
  }
  if (batch.dense.size() != static_cast<size_t>(b) * s.dense_features) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the batch has ", batch.dense.size(), " dense values, the model needs ",
        b, " x ", s.dense_features));
  }
  if (batch.labels.size() != static_cast<size_t>(b)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the batch has ", batch.labels.size(), " labels for ", b, " samples"));
  }
  sparse_.batch = b;
  sparse_.num_fields = batch.num_fields;
  sparse_.offsets = batch.offsets;
  sparse_.ids = batch.ids;
  ASSIGN_OR_RETURN(unique_, DeduplicateIds(sparse_));

  const int dim = s.embedding_dim;
  read_.clear();
  int64_t total_ids = 0;
  for (int t = 0; t < s.num_fields; ++t) {
    if (unique_.ids[t].empty()) continue;
    read_.push_back({t, unique_.ids[t]});
    total_ids += static_cast<int64_t>(unique_.ids[t].size());
  }
  if (absl::Status read = rows.Read(read_, row_values_); !read.ok()) {
    return absl::Status(
        read.code(),
        absl::StrCat("reading ", total_ids, " rows of ", read_.size(),
                     " embedding tables: ", read.message()));
  }
  std::vector<absl::Span<const float>> views(s.num_fields);
  for (size_t i = 0; i < read_.size(); ++i) {
    const TableIds& t = read_[i];
    if (row_values_.size() != read_.size() ||
        row_values_[i].size() != t.ids.size() * dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the row source answered ",
          i < row_values_.size() ? row_values_[i].size() : 0, " values for ",
          t.ids.size(), " rows of dim ", dim, " of table ", t.table));
    }
    views[t.table] = row_values_[i];
  }
  pooled_host_.resize(static_cast<size_t>(b) * model_.pooled_dim());
  RETURN_IF_ERROR(GatherPooled(sparse_, unique_, views, dim, s.pooling,
                               absl::MakeSpan(pooled_host_)));
  RETURN_IF_ERROR(EnsureCapacity(b));
  RETURN_IF_ERROR(backend_->CopyToDevice(batch.dense.data(), batch.dense.size(),
                                         dense_dev_.data()));
  return backend_->CopyToDevice(pooled_host_.data(), pooled_host_.size(),
                                pooled_dev_.data());
}

absl::StatusOr<CtrStepResult> CtrStep::ForwardBackward(const CtrBatch& batch,
                                                       const float* params,
                                                       EmbeddingRowSource& rows,
                                                       float* grads) {
  RETURN_IF_ERROR(Prepare(batch, rows));
  const DlrmSpec& s = model_.spec();
  const int b = batch.batch;
  CtrStepResult result;
  result.batch = b;
  ASSIGN_OR_RETURN(
      result.loss_sum,
      model_.ForwardBackward(params, dense_dev_.data(), pooled_dev_.data(),
                             batch.labels.data(), b, /*grad_scale=*/1.0f, grads,
                             d_pooled_dev_.data()));
  d_pooled_host_.resize(pooled_host_.size());
  RETURN_IF_ERROR(backend_->CopyToHost(
      d_pooled_dev_.data(), d_pooled_host_.size(), d_pooled_host_.data()));

  const int dim = s.embedding_dim;
  std::vector<std::vector<float>> row_grads(s.num_fields);
  std::vector<absl::Span<float>> views(s.num_fields);
  for (int t = 0; t < s.num_fields; ++t) {
    row_grads[t].resize(unique_.ids[t].size() * dim);
    views[t] = absl::MakeSpan(row_grads[t]);
  }
  RETURN_IF_ERROR(ScatterRowGradients(sparse_, unique_, d_pooled_host_, dim,
                                      s.pooling, views));
  result.unique_ids_per_table.resize(s.num_fields);
  for (int t = 0; t < s.num_fields; ++t) {
    const int64_t n = static_cast<int64_t>(unique_.ids[t].size());
    result.unique_ids_per_table[t] = n;
    result.unique_ids += n;
    if (n == 0) continue;
    SparseRows table_rows;
    table_rows.table = t;
    table_rows.ids = std::move(unique_.ids[t]);
    table_rows.grads = std::move(row_grads[t]);
    result.rows.push_back(std::move(table_rows));
  }
  return result;
}

absl::Status CtrStep::Predict(const CtrBatch& batch, const float* params,
                              EmbeddingRowSource& rows,
                              absl::Span<float> probabilities) {
  if (probabilities.size() != static_cast<size_t>(batch.batch)) {
    return absl::InvalidArgumentError(absl::StrCat("room for ",
                                                   probabilities.size(),
                                                   " probabilities, the "
                                                   "batch has ",
                                                   batch.batch, " samples"));
  }
  RETURN_IF_ERROR(Prepare(batch, rows));
  return model_.Predict(params, dense_dev_.data(), pooled_dev_.data(),
                        batch.batch, probabilities.data());
}

}  // namespace ferry

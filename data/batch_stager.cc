#include "data/batch_stager.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ferry {

absl::StatusOr<BatchStager> BatchStager::Create(ComputeBackend* backend,
                                                int feature_dim,
                                                int max_batch) {
  if (feature_dim <= 0 || max_batch <= 0) {
    return absl::InvalidArgumentError(
        "BatchStager: feature_dim and max_batch must be > 0");
  }
  BatchStager stager;
  stager.backend_ = backend;
  stager.feature_dim_ = feature_dim;
  stager.max_batch_ = max_batch;
  const size_t n = static_cast<size_t>(feature_dim) * max_batch;
  ASSIGN_OR_RETURN(stager.host_, backend->AllocateHost(n));
  if (!backend->IsHostMemory()) {
    ASSIGN_OR_RETURN(stager.device_, backend->Allocate(n));
  }
  stager.labels_.resize(max_batch);
  return stager;
}

absl::Status BatchStager::Stage(const Dataset& dataset,
                                absl::Span<const int64_t> indices) {
  if (static_cast<int>(indices.size()) > max_batch_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch of ", indices.size(), " exceeds the maximum ", max_batch_));
  }
  if (dataset.feature_dim != feature_dim_) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset has ", dataset.feature_dim,
                     " features but the model expects ", feature_dim_));
  }
  const size_t n = indices.size();
  RETURN_IF_ERROR(GatherBatch(dataset, indices,
                              absl::MakeSpan(host_.data(), n * feature_dim_),
                              absl::MakeSpan(labels_.data(), n)));
  if (!device_.empty()) {
    RETURN_IF_ERROR(
        backend_->CopyToDevice(host_.data(), n * feature_dim_, device_.data()));
  }
  size_ = static_cast<int>(n);
  return absl::OkStatus();
}

const float* BatchStager::inputs() const {
  return device_.empty() ? host_.data() : device_.data();
}

}  // namespace ferry

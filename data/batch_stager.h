// Turns a list of sample indices into a batch on the compute backend:
// gathers rows into (pinned) host staging, copies them to the device, and
// keeps the labels on the host (the loss kernel takes host labels).
//
// Thread safety: one thread at a time.
#ifndef FERRY_DATA_BATCH_STAGER_H_
#define FERRY_DATA_BATCH_STAGER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "compute/compute_backend.h"
#include "data/dataset.h"

namespace ferry {

class BatchStager {
 public:
  // `backend` must outlive the stager. Batches up to `max_batch` rows.
  static absl::StatusOr<BatchStager> Create(ComputeBackend* backend,
                                            int feature_dim, int max_batch);

  // Stages dataset rows `indices` (at most max_batch). INVALID_ARGUMENT on a
  // bad index or a feature size that does not match.
  absl::Status Stage(const Dataset& dataset, absl::Span<const int64_t> indices);

  const float* inputs() const;  // backend memory, [size(), feature_dim]
  const int32_t* labels() const { return labels_.data(); }
  int size() const { return size_; }

 private:
  BatchStager() = default;

  ComputeBackend* backend_ = nullptr;
  int feature_dim_ = 0;
  int max_batch_ = 0;
  int size_ = 0;
  DeviceBuffer host_;    // staging on the host
  DeviceBuffer device_;  // empty when the backend uses host memory
  std::vector<int32_t> labels_;
};

}  // namespace ferry

#endif  // FERRY_DATA_BATCH_STAGER_H_

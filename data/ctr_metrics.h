// Binary-classification metrics for CTR models: the area under the ROC curve
// (the probability that a random positive scores above a random negative,
// ties counting one half) and the mean log loss.
#ifndef FERRY_DATA_CTR_METRICS_H_
#define FERRY_DATA_CTR_METRICS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ferry {

// AUC of `scores` (any order-preserving scale: logits or probabilities)
// against `labels` (0 or 1), O(n log n). INVALID_ARGUMENT for sizes that
// differ, a label other than 0/1 or a NaN score; FAILED_PRECONDITION when
// one class is absent (the AUC is undefined).
absl::StatusOr<double> BinaryAuc(absl::Span<const float> scores,
                                 absl::Span<const int32_t> labels);

// Mean of -[y log p + (1 - y) log(1 - p)] with p clipped to
// [1e-7, 1 - 1e-7]. INVALID_ARGUMENT as BinaryAuc, and for an empty input or
// a probability outside [0, 1].
absl::StatusOr<double> LogLoss(absl::Span<const float> probabilities,
                               absl::Span<const int32_t> labels);

}  // namespace ferry

#endif  // FERRY_DATA_CTR_METRICS_H_

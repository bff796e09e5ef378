#include "data/ctr_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "absl/strings/str_format.h"

namespace ferry {
namespace {

absl::Status CheckInputs(absl::Span<const float> scores,
                         absl::Span<const int32_t> labels) {
  if (scores.size() != labels.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d scores for %d labels", scores.size(), labels.size()));
  }
  for (size_t i = 0; i < scores.size(); ++i) {
    if (labels[i] != 0 && labels[i] != 1) {
      return absl::InvalidArgumentError(
          absl::StrFormat("label %d of row %d is not 0 or 1", labels[i], i));
    }
    if (std::isnan(scores[i])) {
      return absl::InvalidArgumentError(
          absl::StrFormat("the score of row %d is NaN", i));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<double> BinaryAuc(absl::Span<const float> scores,
                                 absl::Span<const int32_t> labels) {
  if (absl::Status ok = CheckInputs(scores, labels); !ok.ok()) return ok;
  const int64_t n = static_cast<int64_t>(scores.size());
  const int64_t positives = std::count(labels.begin(), labels.end(), 1);
  const int64_t negatives = n - positives;
  if (positives == 0 || negatives == 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("AUC needs both classes: %d positives, %d negatives",
                        positives, negatives));
  }
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return scores[a] < scores[b]; });
  // Sum of the positives' ranks (1-based), ties at their average rank.
  double rank_sum = 0.0;
  for (int64_t i = 0; i < n;) {
    int64_t j = i;
    int64_t tied_positives = 0;
    while (j < n && scores[order[j]] == scores[order[i]]) {
      tied_positives += labels[order[j]];
      ++j;
    }
    const double average_rank = 0.5 * static_cast<double>(i + 1 + j);
    rank_sum += average_rank * static_cast<double>(tied_positives);
    i = j;
  }
  const double p = static_cast<double>(positives);
  return (rank_sum - p * (p + 1.0) / 2.0) /
         (p * static_cast<double>(negatives));
}

absl::StatusOr<double> LogLoss(absl::Span<const float> probabilities,
                               absl::Span<const int32_t> labels) {
  if (absl::Status ok = CheckInputs(probabilities, labels); !ok.ok()) return ok;
  if (probabilities.empty()) {
    return absl::InvalidArgumentError("log loss of no rows");
  }
  constexpr double kEps = 1e-7;
  double total = 0.0;
  for (size_t i = 0; i < probabilities.size(); ++i) {
    const double p = probabilities[i];
    if (p < 0.0 || p > 1.0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("probability %g of row %d is outside [0, 1]", p, i));
    }
    const double q = std::clamp(p, kEps, 1.0 - kEps);
    total -= labels[i] == 1 ? std::log(q) : std::log(1.0 - q);
  }
  return total / static_cast<double>(probabilities.size());
}

}  // namespace ferry

// RingExchange's absent gradients (AbsentGradientExchange): the ranges of a
// step that no sample of a member used, all-gathered after the buckets, and
// the elements that every member left out, which the step's optimizer then
// skips on every member alike (so the members' weights stay equal).
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/range_sets.h"
#include "common/status_macros.h"
#include "ring/ring_bytes.h"
#include "worker/ring_exchange.h"

namespace ferry {

static_assert(std::endian::native == std::endian::little,
              "absent ranges travel as little-endian int64 pairs");

absl::Status RingExchange::ReadyAbsent(int64_t offset, int64_t length) {
  const int64_t trainable_end = n_ - options_.state_elements;
  if (offset < 0 || length < 0 || offset + length > trainable_end) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "absent gradient range [%d, %d): only the %d trainable parameters "
        "[0, %d) can be absent",
        offset, offset + length, trainable_end, trainable_end));
  }
  RETURN_IF_ERROR(Ready(offset, length));
  // Compressed buckets may carry an error-feedback residual where the
  // gradient is absent: there absent is zeros (as in compressed PS chunks).
  if (options_.agree_on_absent && !options_.compression.compressed() &&
      length > 0) {
    step_absent_.push_back({offset, offset + length});
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<FlatRange>> RingExchange::AgreeOnAbsent() {
  if (!options_.agree_on_absent) return std::vector<FlatRange>();
  // Each member's ranges as little-endian int64 (begin, end) pairs.
  const std::vector<int64_t> pairs =
      ToRangePairs(NormalizeRanges(std::move(step_absent_)));
  step_absent_.clear();
  std::string mine(reinterpret_cast<const char*>(pairs.data()),
                   pairs.size() * sizeof(int64_t));
  ASSIGN_OR_RETURN(std::vector<std::string> all,
                   AllGatherBytes(*session_->transport, session_->next_op++,
                                  std::move(mine), options_.tables_piece_bytes,
                                  absl::Now() + options_.collective_timeout));
  const int64_t trainable_end = n_ - options_.state_elements;
  std::vector<FlatRange> agreed;
  for (size_t rank = 0; rank < all.size(); ++rank) {
    const std::string& bytes = all[rank];
    if (bytes.size() % (2 * sizeof(int64_t)) != 0) {
      return absl::DataLossError(
          absl::StrCat("absent ranges of ring rank ", rank, ": ", bytes.size(),
                       " bytes, not a whole number of (begin, end) pairs"));
    }
    std::vector<int64_t> bounds(bytes.size() / sizeof(int64_t));
    if (!bytes.empty()) std::memcpy(bounds.data(), bytes.data(), bytes.size());
    std::vector<FlatRange> theirs;
    if (absl::Status s = FromRangePairs(
            bounds, trainable_end,
            absl::StrCat("absent ranges of ring rank ", rank), &theirs);
        !s.ok()) {
      return absl::DataLossError(s.message());
    }
    agreed = rank == 0 ? std::move(theirs) : IntersectRangeSets(agreed, theirs);
  }
  return agreed;
}

}  // namespace ferry

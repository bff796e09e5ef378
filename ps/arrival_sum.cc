#include "ps/arrival_sum.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"

namespace ferry {

ArrivalSum::ArrivalSum(std::vector<Chunk> owned, int64_t slice_begin,
                       int64_t slice_size)
    : owned_(std::move(owned)),
      slice_begin_(slice_begin),
      slice_size_(slice_size),
      contributions_(owned_.size(), 0) {}

void ArrivalSum::Reset(int64_t step) {
  step_ = step;
  std::fill(contributions_.begin(), contributions_.end(), 0);
  workers_.clear();
}

absl::StatusOr<bool> ArrivalSum::Add(absl::string_view worker,
                                     int64_t num_samples, size_t index,
                                     absl::Span<const float> values) {
  if (index >= owned_.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "owned chunk %d of %d does not exist", index, owned_.size()));
  }
  const Chunk& chunk = owned_[index];
  if (static_cast<int64_t>(values.size()) != chunk.length) {
    return absl::InvalidArgumentError(
        absl::StrFormat("chunk %d has %d values, expected %d", chunk.id,
                        values.size(), chunk.length));
  }
  auto it = workers_.find(worker);
  if (it != workers_.end() && it->second.num_samples != num_samples) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "worker %s summed chunks of step %d with %d samples, this push "
        "says %d",
        worker, step_, it->second.num_samples, num_samples));
  }
  if (it != workers_.end() && it->second.summed[index]) return false;
  if (sum_.empty()) sum_.resize(static_cast<size_t>(slice_size_));
  if (it == workers_.end()) {
    it = workers_.emplace(std::string(worker), Worker{}).first;
    it->second.num_samples = num_samples;
    it->second.summed.assign(owned_.size(), false);
  }
  float* dst = sum_.data() + (chunk.flat_offset - slice_begin_);
  if (contributions_[index] == 0) {
    std::memcpy(dst, values.data(), values.size() * sizeof(float));
  } else {
    for (size_t i = 0; i < values.size(); ++i) dst[i] += values[i];
  }
  ++contributions_[index];
  it->second.summed[index] = true;
  ++it->second.chunks;
  return true;
}

absl::Status ArrivalSum::CheckSummedExactly(
    absl::string_view what, absl::Span<const PsContributor> set) const {
  for (const PsContributor& c : set) {
    auto it = workers_.find(c.worker_id);
    if (it == workers_.end() ||
        it->second.chunks != static_cast<int64_t>(owned_.size())) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: worker %s's push was not summed whole (%d of %d chunks)", what,
          c.worker_id, it == workers_.end() ? 0 : it->second.chunks,
          owned_.size()));
    }
    if (it->second.num_samples != c.num_samples) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: worker %s's push was summed with %d samples, the set says %d",
          what, c.worker_id, it->second.num_samples, c.num_samples));
    }
  }
  for (const auto& entry : workers_) {
    const std::string& worker = entry.first;
    const Worker& summed = entry.second;
    const bool named = std::any_of(
        set.begin(), set.end(),
        [&](const PsContributor& c) { return c.worker_id == worker; });
    if (!named) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: %d chunks of worker %s were summed on arrival and cannot be "
          "taken out; the step must be formed again",
          what, summed.chunks, worker));
    }
  }
  return absl::OkStatus();
}

}  // namespace ferry

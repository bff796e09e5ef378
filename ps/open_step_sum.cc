#include "ps/open_step_sum.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace ferry {

OpenStepSum::OpenStepSum(bool enabled, int32_t shard_id,
                         std::vector<Chunk> owned, int64_t slice_begin,
                         int64_t slice_size)
    : enabled_(enabled), shard_id_(shard_id) {
  if (enabled_) {
    absl::MutexLock lock(&mu_);
    sum_ =
        std::make_unique<ArrivalSum>(std::move(owned), slice_begin, slice_size);
  }
}

absl::Status OpenStepSum::Add(const std::string& worker, int64_t step,
                              int64_t num_samples, uint64_t epoch, size_t index,
                              absl::Span<const float> values) {
  absl::MutexLock lock(&mu_);
  if (epoch != epoch_ || step != sum_->step()) {
    return absl::AbortedError(absl::StrFormat(
        "push from %s for step %d: shard %d applied or rolled back that step "
        "while the push was received",
        worker, step, shard_id_));
  }
  return sum_->Add(worker, num_samples, index, values).status();
}

bool OpenStepSum::SummedExactly(absl::Span<const PsContributor> set) const {
  if (!enabled_) return true;
  absl::MutexLock lock(&mu_);
  return sum_->CheckSummedExactly("", set).ok();
}

absl::Status OpenStepSum::ApplyExactly(
    absl::string_view what, absl::Span<const PsContributor> set,
    absl::FunctionRef<absl::Status(ArrivalSum&)> apply) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(sum_->CheckSummedExactly(what, set));
  return apply(*sum_);
}

void OpenStepSum::RollBack(uint64_t epoch, int64_t step) {
  absl::MutexLock lock(&mu_);
  epoch_ = epoch;
  if (sum_ != nullptr) sum_->Reset(step);
}

}  // namespace ferry

#include "ps/push_ledger.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/peer_limits.h"
#include "common/range_sets.h"

namespace ferry {

absl::Status PushLedger::CheckSyncPush(const std::string& worker, int64_t step,
                                       int64_t num_samples, int64_t version,
                                       int64_t max_pushes) const {
  if (step < version && AppliedPush(worker, step, num_samples)) {
    // Finalized on push while the worker's pushes to other shards failed:
    // this shard has (and applied) exactly this push, so a retry counts
    // as accepted, as for a push still held.
    return absl::AlreadyExistsError(
        absl::StrFormat("worker %s's push of step %d was applied here "
                        "(version %d)",
                        worker, step, version));
  }
  if (step < version) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "push from %s for step %d: step already applied (version %d)", worker,
        step, version));
  }
  if (step > version) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "push from %s for step %d: step not open yet (open step %d)", worker,
        step, version));
  }
  if (held_.contains(worker)) {
    return absl::AlreadyExistsError(
        absl::StrFormat("worker %s already pushed step %d", worker, step));
  }
  if (held() >= max_pushes) {
    return LimitExceeded(
        absl::StrFormat("the number of pushes buffered for step %d", step),
        held() + 1, max_pushes);
  }
  return absl::OkStatus();
}

absl::Status PushLedger::CheckAsyncPush(const std::string& worker, int64_t step,
                                        int64_t max_workers) const {
  auto it = last_step_.find(worker);
  if (it != last_step_.end() && step <= it->second) {
    return absl::AlreadyExistsError(
        absl::StrFormat("worker %s already pushed step %d (last applied step "
                        "%d)",
                        worker, step, it->second));
  }
  const int64_t known = static_cast<int64_t>(last_step_.size());
  if (it == last_step_.end() && known >= max_workers) {
    return LimitExceeded("the number of async workers the shard remembers",
                         known + 1, max_workers);
  }
  return absl::OkStatus();
}

bool PushLedger::StepComplete(absl::Span<const PsContributor> set) const {
  for (const PsContributor& c : set) {
    auto it = held_.find(c.worker_id);
    if (it == held_.end() || it->second.num_samples != c.num_samples ||
        it->second.step_set != set) {
      return false;
    }
  }
  return true;
}

absl::Status PushLedger::CheckHeld(
    int64_t step, absl::Span<const PsContributor> contributors) const {
  for (const PsContributor& c : contributors) {
    auto it = held_.find(c.worker_id);
    if (it == held_.end()) {
      return absl::FailedPreconditionError(
          absl::StrFormat("worker %s has not pushed step %d to shard %d",
                          c.worker_id, step, shard_id_));
    }
    if (c.num_samples != it->second.num_samples) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "worker %s: finalize says %d samples, its push said %d", c.worker_id,
          c.num_samples, it->second.num_samples));
    }
  }
  return absl::OkStatus();
}

absl::Status PushLedger::CheckAppliedOver(
    int64_t step, absl::Span<const PsContributor> contributors) const {
  auto applied = applied_sets_.find(step);
  if (applied != applied_sets_.end() &&
      !SameContributors(applied->second, contributors)) {
    return absl::AlreadyExistsError(absl::StrFormat(
        "step %d was already applied on shard %d over {%s}, not {%s}", step,
        shard_id_, DescribeContributors(applied->second),
        DescribeContributors(contributors)));
  }
  return absl::OkStatus();
}

std::vector<const std::vector<SparseRows>*> PushLedger::RowsOf(
    absl::Span<const PsContributor> contributors) {
  std::vector<const std::vector<SparseRows>*> rows;
  for (const PsContributor& c : contributors) {
    rows.push_back(&held_[c.worker_id].rows);
  }
  return rows;
}

std::vector<float>& PushLedger::SumInOrder(
    absl::Span<const PsContributor> contributors, float divisor) {
  // 0 + g is exact, so starting from the first buffer changes no value.
  std::vector<float>& sum = held_[contributors.front().worker_id].grad;
  if (contributors.size() == 1) {
    for (float& v : sum) v /= divisor;
    return sum;
  }
  // The last addition divides in the same pass.
  const size_t last = contributors.size() - 1;
  for (size_t c = 1; c < last; ++c) {
    const std::vector<float>& g = held_[contributors[c].worker_id].grad;
    for (size_t i = 0; i < g.size(); ++i) sum[i] += g[i];
  }
  const std::vector<float>& g = held_[contributors[last].worker_id].grad;
  for (size_t i = 0; i < g.size(); ++i) sum[i] = (sum[i] + g[i]) / divisor;
  return sum;
}

std::vector<FlatRange> PushLedger::AbsentInAll(
    absl::Span<const PsContributor> contributors) const {
  std::vector<FlatRange> absent;
  for (size_t c = 0; c < contributors.size(); ++c) {
    auto held = held_.find(contributors[c].worker_id);
    if (held == held_.end()) return {};
    const std::vector<FlatRange>& theirs = held->second.absent;
    absent = c == 0 ? theirs : IntersectRangeSets(absent, theirs);
    if (absent.empty()) break;
  }
  return absent;
}

void PushLedger::DropHeld(GradBufferPool& pool) {
  for (auto& [worker, contribution] : held_) {
    pool.Recycle(std::move(contribution.grad));
  }
  held_.clear();
}

void PushLedger::RememberApplied(int64_t step,
                                 absl::Span<const PsContributor> contributors) {
  applied_sets_[step].assign(contributors.begin(), contributors.end());
  while (static_cast<int64_t>(applied_sets_.size()) > kRememberedSteps) {
    applied_sets_.erase(applied_sets_.begin());
  }
}

void PushLedger::RollBack(int64_t version, GradBufferPool& pool) {
  DropHeld(pool);
  last_step_.clear();
  // Steps at or after the version kept were not applied to it.
  applied_sets_.erase(applied_sets_.lower_bound(version), applied_sets_.end());
}

bool PushLedger::AppliedPush(const std::string& worker, int64_t step,
                             int64_t num_samples) const {
  auto applied = applied_sets_.find(step);
  if (applied == applied_sets_.end()) return false;
  return std::find(applied->second.begin(), applied->second.end(),
                   PsContributor{worker, num_samples}) != applied->second.end();
}

}  // namespace ferry

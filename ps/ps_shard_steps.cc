// PsShard's sync steps: FinalizeStep, finalize on push (the step's set
// complete on its last push) and the update over a contributor set.
#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/prometheus_metrics.h"
#include "common/status_macros.h"
#include "ps/ps_shard.h"

namespace ferry {
namespace {
absl::Status RejectedFinalize(absl::Status status) {
  return Metrics().Reject(MetricRole::kPs, "finalize", std::move(status));
}
}  // namespace

absl::StatusOr<int64_t> PsShard::FinalizeStep(
    absl::string_view job_id, int64_t step,
    absl::Span<const PsContributor> contributors, int64_t generation) {
  ReadyList ready;
  int64_t version = 0;
  {
    absl::MutexLock lock(&mu_);
    if (job_id != config_.job_id) {
      return RejectedFinalize(absl::FailedPreconditionError(
          absl::StrFormat("finalize for job '%s', this shard serves job '%s'",
                          job_id, config_.job_id)));
    }
    if (config_.consistency != PsConsistency::kSync) {
      return RejectedFinalize(absl::FailedPreconditionError(
          "FinalizeStep is for sync mode only; this shard is async"));
    }
    if (updates_stopped_) return StoppedError();
    if (step < version_) {  // already applied: idempotent
      auto applied = applied_sets_.find(step);
      if (applied != applied_sets_.end() &&
          !SameContributors(applied->second, contributors)) {
        return RejectedFinalize(absl::AlreadyExistsError(absl::StrFormat(
            "step %d was already applied on shard %d over {%s}, not {%s}", step,
            config_.shard_id, DescribeContributors(applied->second),
            DescribeContributors(contributors))));
      }
      // As for a step applied here: the coordinator's generation fences
      // older pushes (a step finalized on push raised no fence).
      max_generation_ = std::max(max_generation_, generation);
      return version_;
    }
    if (step > version_) {
      return RejectedFinalize(absl::FailedPreconditionError(absl::StrFormat(
          "finalize of step %d: shard %d is at version %d (it may have "
          "restarted or been rolled back)",
          step, config_.shard_id, version_)));
    }
    if (generation < max_generation_) {
      return RejectedFinalize(absl::AbortedError(absl::StrFormat(
          "finalize of step %d has generation %d, older than generation %d",
          step, generation, max_generation_)));
    }
    if (absl::Status valid =
            CheckStepContributors(absl::StrFormat("finalize of step %d", step),
                                  contributors, config_.limits.max_step_pushes);
        !valid.ok()) {
      return RejectedFinalize(std::move(valid));
    }
    for (const PsContributor& c : contributors) {
      auto it = pending_.find(c.worker_id);
      if (it == pending_.end()) {
        return RejectedFinalize(absl::FailedPreconditionError(
            absl::StrFormat("worker %s has not pushed step %d to shard %d",
                            c.worker_id, step, config_.shard_id)));
      }
      if (c.num_samples != it->second.num_samples) {
        return RejectedFinalize(absl::InvalidArgumentError(absl::StrFormat(
            "worker %s: finalize says %d samples, its push said %d",
            c.worker_id, c.num_samples, it->second.num_samples)));
      }
    }
    // FAILED_PRECONDITION: on arrival, a sum of other workers than these.
    if (absl::Status applied = ApplyStepLocked(contributors, ready);
        !applied.ok()) {
      return absl::IsFailedPrecondition(applied)
                 ? RejectedFinalize(std::move(applied))
                 : applied;
    }
    max_generation_ = generation;
    version = version_;
  }
  for (auto& [callback, snapshot] : ready) callback(std::move(snapshot));
  return version;
}

bool PsShard::AppliedPushLocked(const PsPushHeader& h) const {
  mu_.AssertHeld();
  auto applied = applied_sets_.find(h.step);
  if (applied == applied_sets_.end()) return false;
  return std::find(applied->second.begin(), applied->second.end(),
                   PsContributor{h.worker_id, h.num_samples}) !=
         applied->second.end();
}

bool PsShard::StepCompleteLocked(absl::Span<const PsContributor> set) const {
  mu_.AssertHeld();
  for (const PsContributor& c : set) {
    auto it = pending_.find(c.worker_id);
    if (it == pending_.end() || it->second.num_samples != c.num_samples ||
        it->second.step_set != set) {
      return false;
    }
  }
  return true;
}

bool PsShard::SumIsExactlyLocked(absl::Span<const PsContributor> set) const {
  mu_.AssertHeld();
  if (!SumsOnArrival()) return true;
  absl::MutexLock lock(&sum_mu_);
  return arrival_->CheckSummedExactly("", set).ok();
}

absl::Status PsShard::ApplyStepLocked(
    absl::Span<const PsContributor> contributors, ReadyList& ready) {
  mu_.AssertHeld();
  int64_t total_samples = 0;
  for (const PsContributor& c : contributors) total_samples += c.num_samples;
  const int64_t step = version_;
  // On arrival: the sum holds exactly `contributors`' pushes, or nothing
  // changes (checked before the rows are applied), and no chunk joins it
  // until it is applied (sum_mu_ held).
  std::optional<absl::MutexLock> sum_lock;
  ArrivalSum* arrival = nullptr;  // set only while sum_lock holds sum_mu_
  if (SumsOnArrival()) {
    sum_lock.emplace(&sum_mu_);
    sum_mu_.AssertHeld();
    arrival = arrival_.get();
    RETURN_IF_ERROR(arrival->CheckSummedExactly(
        absl::StrFormat("step %d on shard %d", step, config_.shard_id),
        contributors));
  }
  if (sparse_ != nullptr) {
    // Each push's rows were checked on arrival (AddRows).
    std::vector<const std::vector<SparseRows>*> rows;
    for (const PsContributor& c : contributors) {
      rows.push_back(&pending_[c.worker_id].rows);
    }
    RETURN_IF_ERROR(sparse_->ApplyCheckedStep(rows, total_samples, step));
  }
  // Sum in the order named into the first contributor's buffer, then
  // divide: the same values as a sum from zero (0 + g is exact). On
  // arrival the sum is there already.
  std::vector<float>& sum = arrival != nullptr
                                ? arrival->sum()
                                : pending_[contributors.front().worker_id].grad;
  if (arrival == nullptr) {
    for (size_t c = 1; c < contributors.size(); ++c) {
      const std::vector<float>& g = pending_[contributors[c].worker_id].grad;
      for (size_t i = 0; i < g.size(); ++i) sum[i] += g[i];
    }
  }
  const float n = static_cast<float>(total_samples);
  for (float& g : sum) g /= n;
  const absl::Status applied = ApplyLocked(sum.data(), ready);
  // The first buffer holds the sum now: the pushes are spent either way.
  for (auto& [worker, contribution] : pending_) {
    RecycleGradBuffer(std::move(contribution.grad));
  }
  pending_.clear();
  if (arrival != nullptr) arrival->Reset(version_);  // the next step, or again
  RETURN_IF_ERROR(applied);
  applied_sets_[step].assign(contributors.begin(), contributors.end());
  while (static_cast<int64_t>(applied_sets_.size()) > kRememberedSteps) {
    applied_sets_.erase(applied_sets_.begin());
  }
  return absl::OkStatus();
}

}  // namespace ferry

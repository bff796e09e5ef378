// PsShard's sync steps: FinalizeStep, finalize on push (the step's set
// complete on its last push) and the update over a contributor set.
#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/prometheus_metrics.h"
#include "common/status_macros.h"
#include "common/step_trace.h"
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
    const int64_t open = slice_.version();
    if (step < open) {  // already applied: idempotent
      if (absl::Status same = ledger_.CheckAppliedOver(step, contributors);
          !same.ok()) {
        return RejectedFinalize(std::move(same));
      }
      // As for a step applied here: the coordinator's generation fences
      // older pushes (a step finalized on push raised no fence).
      max_generation_ = std::max(max_generation_, generation);
      return open;
    }
    if (step > open) {
      return RejectedFinalize(absl::FailedPreconditionError(absl::StrFormat(
          "finalize of step %d: shard %d is at version %d (it may have "
          "restarted or been rolled back)",
          step, config_.shard_id, open)));
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
    if (absl::Status held = ledger_.CheckHeld(step, contributors); !held.ok()) {
      return RejectedFinalize(std::move(held));
    }
    // FAILED_PRECONDITION: on arrival, a sum of other workers than these.
    if (absl::Status applied = ApplyStepLocked(contributors, ready);
        !applied.ok()) {
      return absl::IsFailedPrecondition(applied)
                 ? RejectedFinalize(std::move(applied))
                 : applied;
    }
    max_generation_ = generation;
    version = slice_.version();
  }
  for (auto& [callback, snapshot] : ready) callback(std::move(snapshot));
  return version;
}

absl::Status PsShard::ApplyStepLocked(
    absl::Span<const PsContributor> contributors, ReadyList& ready) {
  mu_.AssertHeld();
  if (!arrival_.enabled()) return ApplySumLocked(contributors, nullptr, ready);
  // The sum holds exactly `contributors`' pushes, or nothing changes
  // (checked before the rows are applied), and no chunk joins it until it
  // is applied.
  return arrival_.ApplyExactly(
      absl::StrFormat("step %d on shard %d", slice_.version(),
                      config_.shard_id),
      contributors, [&](ArrivalSum& sum) {
        mu_.AssertHeld();
        return ApplySumLocked(contributors, &sum, ready);
      });
}

absl::Status PsShard::ApplySumLocked(
    absl::Span<const PsContributor> contributors, ArrivalSum* arrival,
    ReadyList& ready) {
  mu_.AssertHeld();
  int64_t total_samples = 0;
  for (const PsContributor& c : contributors) total_samples += c.num_samples;
  const int64_t step = slice_.version();
  if (sparse_ != nullptr) {
    // Each push's rows were checked on arrival (AddRows).
    RETURN_IF_ERROR(sparse_->ApplyCheckedStep(ledger_.RowsOf(contributors),
                                              total_samples, step));
  }
  // Sum in the order named, then divide. On arrival the sum is there
  // already.
  const float n = static_cast<float>(total_samples);
  std::vector<float>& sum =
      arrival != nullptr ? arrival->sum() : ledger_.SumInOrder(contributors, n);
  if (arrival != nullptr) {
    for (float& g : sum) g /= n;
  }
  const absl::Status applied =
      ApplyLocked(sum.data(), ready, 1.0, ledger_.AbsentInAll(contributors));
  // The first buffer holds the sum now: the pushes are spent either way.
  ledger_.DropHeld(grads_);
  // The next step, or the same one again.
  if (arrival != nullptr) arrival->Reset(slice_.version());
  RETURN_IF_ERROR(applied);
  StepTrace::Record(StepEvent::kStepApplied, step, config_.shard_id);
  ledger_.RememberApplied(step, contributors);
  return absl::OkStatus();
}

}  // namespace ferry

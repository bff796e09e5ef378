#include "coordinator/recovery_log.h"

#include <algorithm>

namespace ferry {

RestoreFailureAction AfterRestore(const absl::Status& restored,
                                  int64_t target) {
  if (restored.ok()) return RestoreFailureAction::kDone;
  const bool transient =
      absl::IsUnavailable(restored) || absl::IsDeadlineExceeded(restored);
  if (transient) return RestoreFailureAction::kRetry;
  if (target == 0) return RestoreFailureAction::kGiveUp;
  if (absl::IsFailedPrecondition(restored) || absl::IsDataLoss(restored))
    return RestoreFailureAction::kTryOlder;
  return RestoreFailureAction::kRetry;
}

void RecoveryLog::RecordApplied(int64_t step, const v1::DataTask& task) {
  steps_[step].push_back(task);
}

void RecoveryLog::Forget(int64_t step) { steps_.erase(step); }

namespace {
void AddNewest(std::vector<int64_t>& versions, int64_t version) {
  versions.push_back(version);
  if (versions.size() > RecoveryLog::kCheckpointsKept)
    versions.erase(versions.begin());
}
void DropFrom(std::vector<int64_t>& versions, int64_t version) {
  versions.erase(std::remove_if(versions.begin(), versions.end(),
                                [&](int64_t c) { return c >= version; }),
                 versions.end());
}
}  // namespace

void RecoveryLog::AddCheckpoint(int64_t version) {
  AddNewest(checkpoints_, version);
  TrimSteps();
}

void RecoveryLog::AddRingCheckpoint(int64_t version) {
  AddNewest(ring_checkpoints_, version);
  TrimSteps();
}

void RecoveryLog::TrimSteps() {
  if (checkpoints_.empty()) return;
  // Keep the log from the oldest checkpoint a restarted shard may hold,
  // and (hybrid) from the newest version both halves hold.
  int64_t keep_from = checkpoints_.size() >= 2
                          ? checkpoints_[checkpoints_.size() - 2]
                          : checkpoints_.front();
  if (ring_keeps_steps_) {
    const std::vector<int64_t> both = CheckpointsOfBothHalves();
    keep_from = std::min(keep_from, both.empty() ? 0 : both.back());
  }
  steps_.erase(steps_.begin(), steps_.lower_bound(keep_from));
}

void RecoveryLog::DropCheckpointsFrom(int64_t version) {
  DropFrom(checkpoints_, version);
}

void RecoveryLog::DropRingCheckpointsFrom(int64_t version) {
  DropFrom(ring_checkpoints_, version);
}

std::vector<int64_t> RecoveryLog::CheckpointsOfBothHalves() const {
  std::vector<int64_t> both;
  for (int64_t c : checkpoints_) {
    if (std::find(ring_checkpoints_.begin(), ring_checkpoints_.end(), c) !=
        ring_checkpoints_.end())
      both.push_back(c);
  }
  std::sort(both.begin(), both.end());
  both.erase(std::unique(both.begin(), both.end()), both.end());
  return both;
}

int64_t RecoveryLog::RestoreTarget(int64_t low, int64_t high,
                                   int64_t steps_applied) const {
  int64_t target = std::min(low, steps_applied);
  // A version no checkpoint holds cannot be the target unless every shard
  // is at it already.
  if (!(low == high && low == target) &&
      std::find(checkpoints_.begin(), checkpoints_.end(), target) ==
          checkpoints_.end()) {
    int64_t best = 0;
    for (int64_t c : checkpoints_) {
      if (c <= target) best = std::max(best, c);
    }
    target = best;
  }
  return target;
}

std::vector<v1::DataTask> RecoveryLog::TakeFrom(int64_t target) {
  std::vector<v1::DataTask> tasks;
  for (auto it = steps_.rbegin(); it != steps_.rend() && it->first >= target;
       ++it) {
    tasks.insert(tasks.end(), it->second.rbegin(), it->second.rend());
  }
  steps_.erase(steps_.lower_bound(target), steps_.end());
  return tasks;
}

void RecoveryLog::SaveTo(v1::CoordinatorState& s) const {
  for (const auto& [step, tasks] : steps_) {
    v1::AppliedStep* a = s.add_applied_log();
    a->set_step(step);
    for (const v1::DataTask& t : tasks) *a->add_tasks() = t;
  }
  for (int64_t c : checkpoints_) s.add_checkpoints(c);
  for (int64_t c : ring_checkpoints_) s.add_ring_checkpoints(c);
}

void RecoveryLog::LoadFrom(const v1::CoordinatorState& s) {
  steps_.clear();
  for (const v1::AppliedStep& a : s.applied_log()) {
    steps_[a.step()].assign(a.tasks().begin(), a.tasks().end());
  }
  checkpoints_.assign(s.checkpoints().begin(), s.checkpoints().end());
  ring_checkpoints_.assign(s.ring_checkpoints().begin(),
                           s.ring_checkpoints().end());
}

}  // namespace ferry

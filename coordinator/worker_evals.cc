#include "coordinator/worker_evals.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace ferry {
namespace {

v1::EvalTask Task(int64_t version, int64_t epoch, bool final) {
  v1::EvalTask task;
  task.set_version(version);
  task.set_epoch(epoch);
  task.set_final(final);
  return task;
}

absl::Status CheckFigures(const v1::WorkerEvaluation& r) {
  if (!std::isfinite(r.accuracy()) || r.accuracy() < 0 || r.accuracy() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("evaluation of version ", r.version(), ": accuracy ",
                     r.accuracy(), " is not in [0, 1]"));
  }
  if (!std::isfinite(r.loss())) {
    return absl::InvalidArgumentError(absl::StrCat("evaluation of version ",
                                                   r.version(), ": loss ",
                                                   r.loss(), " is not finite"));
  }
  if (!std::isfinite(r.duration_seconds()) || r.duration_seconds() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("evaluation of version ", r.version(), ": duration ",
                     r.duration_seconds(), " s is not a time"));
  }
  return absl::OkStatus();
}

}  // namespace

void WorkerEvals::QueueEpochEnd(int64_t version, int64_t epoch) {
  queue_.push_back({.task = Task(version, epoch, false)});
}

void WorkerEvals::QueueFinal(int64_t version, int64_t epoch) {
  final_ = Pending{.task = Task(version, epoch, true)};
}

std::optional<v1::EvalTask> WorkerEvals::ClaimNext(
    const std::string& worker_id) {
  auto claim = [&](Pending& p) -> std::optional<v1::EvalTask> {
    if (!p.claimed_by.empty() && p.claimed_by != worker_id) return std::nullopt;
    p.claimed_by = worker_id;
    return p.task;
  };
  for (Pending& p : queue_) {
    if (auto task = claim(p)) return task;
  }
  if (final_.has_value()) return claim(*final_);
  return std::nullopt;
}

absl::StatusOr<v1::EvalTask> WorkerEvals::Resolve(
    const std::string& worker_id, const v1::WorkerEvaluation& result) {
  if (absl::Status figures = CheckFigures(result); !figures.ok())
    return figures;
  auto held = [&](const Pending& p) {
    return p.claimed_by == worker_id && p.task.version() == result.version() &&
           p.task.epoch() == result.epoch() && p.task.final() == result.final();
  };
  if (final_.has_value() && held(*final_)) {
    v1::EvalTask task = final_->task;
    final_.reset();
    return task;
  }
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (!held(*it)) continue;
    v1::EvalTask task = it->task;
    queue_.erase(it);
    return task;
  }
  return absl::NotFoundError(
      absl::StrCat("worker ", worker_id, " holds no ",
                   result.final() ? "final " : "", "evaluation of version ",
                   result.version(), " (epoch ", result.epoch(), ")"));
}

void WorkerEvals::Release(const std::string& worker_id) {
  for (Pending& p : queue_) {
    if (p.claimed_by == worker_id) p.claimed_by.clear();
  }
  if (final_.has_value() && final_->claimed_by == worker_id)
    final_->claimed_by.clear();
}

void WorkerEvals::SaveTo(v1::CoordinatorState& state) const {
  for (const Pending& p : queue_) *state.add_worker_evals() = p.task;
  if (final_.has_value()) *state.add_worker_evals() = final_->task;
}

void WorkerEvals::LoadFrom(const v1::CoordinatorState& state) {
  queue_.clear();
  final_.reset();
  for (const v1::EvalTask& task : state.worker_evals()) {
    if (task.final()) {
      final_ = Pending{.task = task};
    } else {
      queue_.push_back({.task = task});
    }
  }
}

void WorkerEvals::AbandonAll() {
  abandoned_ += static_cast<int64_t>(queue_.size()) + (final_ ? 1 : 0);
  queue_.clear();
  final_.reset();
}

}  // namespace ferry

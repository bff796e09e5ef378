// The Coordinator's evaluations run by its workers (coordinator/
// worker_evals.h): a job whose model is its workers' is scored by a worker
// that evaluates (a PyTorch script's job.evaluate), on the weights of each
// epoch end and of the job's end, and its figures become the job's
// EvalPoints like the coordinator's own test-set evaluations. In sync mode
// no step forms while an epoch end waits for its worker, so the weights it
// evaluates are exactly those of its version; async jobs evaluate the
// weights at the time the task is handed out.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "coordinator/coordinator.h"

namespace ferry {

bool Coordinator::WorkerEvaluated() const {
  return options_.job.model_from_worker();
}

bool Coordinator::CanEvaluate(const Member& member) const {
  // A ring member holds the job's weights once it was in an applied step
  // (every member is in every step after it); one that just joined does
  // not yet.
  return member.evaluates &&
         (!rules_.members_hold_weights() || member.applied_any);
}

bool Coordinator::AnyMemberEvaluates() const {
  const auto& members = membership_.members();
  return std::any_of(members.begin(), members.end(), [this](const auto& m) {
    mu_.AssertHeld();
    return CanEvaluate(m.second);
  });
}

void Coordinator::QueueWorkerEpochEnd(int64_t version, int64_t epoch) {
  if (WorkerEvaluated() && AnyMemberEvaluates())
    worker_evals_.QueueEpochEnd(version, epoch);
}

void Coordinator::QueueWorkerFinal(int64_t version, int64_t epoch) {
  if (WorkerEvaluated() && AnyMemberEvaluates())
    worker_evals_.QueueFinal(version, epoch);
}

bool Coordinator::StepsWaitForWorkerEval() const {
  return rules_.sync() && worker_evals_.pending_epoch_ends() > 0 &&
         AnyMemberEvaluates();
}

std::optional<v1::NextTaskResponse> Coordinator::EvalTaskFor(
    const Member& member) {
  if (!CanEvaluate(member)) return std::nullopt;
  std::optional<v1::EvalTask> task = worker_evals_.ClaimNext(member.id);
  if (!task.has_value()) return std::nullopt;
  v1::NextTaskResponse r =
      Action(v1::NextTaskResponse::EVALUATE, membership_.generation());
  r.set_fence(recovery_state_.fence());
  r.set_step(task->version());
  r.set_pull_version(task->version());
  r.set_epoch(task->epoch());
  *r.mutable_evaluate() = *task;
  return r;
}

absl::Status Coordinator::RecordWorkerEvaluation(
    Member& member, const v1::WorkerEvaluation& result) {
  absl::StatusOr<v1::EvalTask> task = worker_evals_.Resolve(member.id, result);
  if (absl::IsInvalidArgument(task.status())) return task.status();
  if (!task.ok()) {  // stale or repeated: nothing to record
    LogInfo(absl::StrCat("ignored: ", task.status().message()));
    return absl::OkStatus();
  }
  v1::EvalPoint point;
  point.set_step(task->version());
  point.set_epoch(task->epoch());
  point.set_final(task->final());
  point.set_test_accuracy(result.accuracy());
  point.set_test_loss(result.loss());
  point.set_seconds(absl::ToDoubleSeconds(Now() - start_));
  point.set_duration_seconds(result.duration_seconds());
  evals_.AddResult(point);
  QueueEvalMetrics(point);
  AddEvent("evaluated", member.id, task->version(), 0,
           absl::StrCat(task->final() ? "final, " : "", "accuracy ",
                        result.accuracy(), ", loss ", result.loss()));
  if (task->final()) MaybeFinishJob();
  return absl::OkStatus();
}

void Coordinator::GiveBackEvals(const std::string& worker_id) {
  worker_evals_.Release(worker_id);
  if (AnyMemberEvaluates()) return;
  const bool pending =
      worker_evals_.final_pending() || worker_evals_.pending_epoch_ends() > 0;
  worker_evals_.AbandonAll();
  if (!pending) return;
  LogInfo("no worker that evaluates is left: its evaluations are given up");
  MaybeFinishJob();
}

void Coordinator::MaybeFinishJob() {
  if (!final_scored_.has_value() || worker_evals_.final_pending()) return;
  if (evals_.finished()) return;
  evals_.Finish(Now(), *final_scored_);
}

}  // namespace ferry

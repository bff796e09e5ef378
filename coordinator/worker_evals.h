// WorkerEvals: the evaluations of a job whose model is its workers'
// (JobSpec.model_from_worker), which the workers run themselves (a PyTorch
// script's job.evaluate, python/ferry/torch). The coordinator queues each
// epoch end and the job's end here; each goes to one worker that evaluates
// (NextTaskRequest.evaluates) as an EVALUATE task, while the job's weights
// are those of its version (sync steps wait for it). The report of the
// worker holding it resolves it. A worker that leaves gives back what
// it holds, for another worker. The pending ones are part of the
// coordinator's saved state.
//
// Ownership: plain value type.
// Thread safety: not thread-safe; the Coordinator guards it with its mutex.
#ifndef FERRY_COORDINATOR_WORKER_EVALS_H_
#define FERRY_COORDINATOR_WORKER_EVALS_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "ferry/v1/coordinator.pb.h"
#include "ferry/v1/coordinator_state.pb.h"

namespace ferry {

class WorkerEvals {
 public:
  // The weights of `version` ended `epoch` (async jobs: version 0, i.e.
  // the first weights pulled after the epoch ended).
  void QueueEpochEnd(int64_t version, int64_t epoch);
  // The job ended at `version` (`epoch`: the epoch it ended with, or -1):
  // its final evaluation. A second call replaces a final not yet resolved.
  void QueueFinal(int64_t version, int64_t epoch);

  // The evaluation `worker_id` runs next: the oldest epoch end, else the
  // final evaluation, that waits unclaimed (or is this worker's already: a
  // task asked again). nullopt: none.
  std::optional<v1::EvalTask> ClaimNext(const std::string& worker_id);

  // `worker_id` reports `result`: the task it resolves. INVALID_ARGUMENT
  // (nothing changes) for figures that are not finite, an accuracy outside
  // [0, 1] or a negative duration; NOT_FOUND for a task this worker does
  // not hold (a stale or repeated report, one given back when it was slow).
  absl::StatusOr<v1::EvalTask> Resolve(const std::string& worker_id,
                                       const v1::WorkerEvaluation& result);

  // `worker_id` left: what it holds waits for another worker.
  void Release(const std::string& worker_id);
  // No worker that evaluates is left: every evaluation is given up
  // (abandoned() counts them).
  void AbandonAll();

  // The evaluations not yet resolved (epoch ends oldest first, then the
  // final one) into state.worker_evals; LoadFrom queues them again,
  // unclaimed (the workers that held them ask again after a restart).
  void SaveTo(v1::CoordinatorState& state) const;
  void LoadFrom(const v1::CoordinatorState& state);

  // A final evaluation is queued and neither resolved nor abandoned.
  bool final_pending() const { return final_.has_value(); }
  // Epoch ends queued and not yet resolved (claimed or not).
  int pending_epoch_ends() const { return static_cast<int>(queue_.size()); }
  // Evaluations given up (AbandonAll).
  int64_t abandoned() const { return abandoned_; }

 private:
  struct Pending {
    v1::EvalTask task;
    std::string claimed_by = "";  // empty: unclaimed
  };
  std::deque<Pending> queue_;  // epoch ends, oldest first
  std::optional<Pending> final_;
  int64_t abandoned_ = 0;
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_WORKER_EVALS_H_

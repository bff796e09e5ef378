// EvalSchedule: the job's evaluations and its end. An epoch's end queues
// an evaluation of the weights at its version (in sync mode holding the
// next epoch's steps until those weights are fetched); the end of training
// queues the final one, whose result finishes the job. Keeps the results
// in the order they came.
//
// Ownership: plain value type.
// Thread safety: not thread-safe. The Coordinator holds it as a field
// guarded by its mutex (ABSL_GUARDED_BY(mu_)).
#ifndef FERRY_COORDINATOR_EVAL_SCHEDULE_H_
#define FERRY_COORDINATOR_EVAL_SCHEDULE_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "ferry/v1/coordinator.pb.h"
#include "ferry/v1/coordinator_state.pb.h"

namespace ferry {

// One evaluation to run.
struct EvalRequest {
  int64_t version = 0;
  int64_t epoch = -1;  // the epoch that ended at `version`, or -1
  bool final = false;  // the job's last evaluation
  // Sync epoch end: no step of the next epoch forms until the weights of
  // `version` are fetched (so the epoch's line reports its own weights).
  bool holds_steps = false;
};

class EvalSchedule {
 public:
  // Queues the evaluation of the end of `epoch` at `version`; `hold_steps`:
  // steps are held (steps_held()) until ReleaseSteps().
  void QueueEpochEnd(int64_t version, int64_t epoch, bool hold_steps);
  // Ends training and queues the final evaluation at `version` (`epoch`:
  // the epoch the job ended with, -1 when it stopped inside one). False
  // (nothing queued) when training had ended already.
  bool EndTraining(int64_t version, int64_t epoch);

  // Whether an evaluation waits to run.
  bool pending() const { return !queue_.empty(); }
  // The next evaluation, out of the queue. REQUIRES: pending().
  EvalRequest Pop();

  // Whether steps wait for an epoch-end evaluation's fetch.
  bool steps_held() const { return steps_held_; }
  // Lets steps form again; false when they were not held.
  bool ReleaseSteps();

  // Records an evaluation's result (a final one's duration_seconds is the
  // final evaluation's time).
  void AddResult(const v1::EvalPoint& point);
  // The final evaluation ran (or failed): the job is finished at `now`.
  // `failure` (non-OK): why the final evaluation failed, which the status
  // reports (final_eval_error) so that the job is not taken as evaluated.
  void Finish(absl::Time now, const absl::Status& failure = absl::OkStatus());

  bool training_done() const { return training_done_; }
  bool finished() const { return finished_; }
  // When the job finished; nullopt before.
  std::optional<absl::Time> finish_time() const { return finish_time_; }
  const std::vector<v1::EvalPoint>& results() const { return results_; }

  // StatusResponse: evals, eval_seconds, finished, training_done.
  void FillStatus(v1::StatusResponse& status) const;
  // CoordinatorState: evals, final_eval_seconds, training_done.
  void SaveTo(v1::CoordinatorState& state) const;
  // The saved results and the final evaluation's time (training_done is
  // the caller's: a job that had ended training ends it again, which
  // evaluates again).
  void LoadFrom(const v1::CoordinatorState& state);

 private:
  std::deque<EvalRequest> queue_;
  bool steps_held_ = false;
  bool training_done_ = false;
  bool finished_ = false;
  std::optional<absl::Time> finish_time_;
  std::vector<v1::EvalPoint> results_;
  // The final evaluation's own duration (0 until it ran).
  double final_eval_seconds_ = 0;
  std::string final_eval_error_;  // empty: it did not fail
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_EVAL_SCHEDULE_H_

// MetricsLines: the training-curve points (a StepMetrics per committed
// step or applied task, an EvalMetrics per evaluation) queued under the
// coordinator's lock in the order of the changes they describe, and taken
// out to be written after it; the rule for a line's step_seconds; and the
// workers' cumulative byte counts a step line carries.
//
// Ownership: plain value type.
// Thread safety: not thread-safe. The Coordinator holds it as a field
// guarded by its mutex (ABSL_GUARDED_BY(mu_)).
#ifndef FERRY_COORDINATOR_METRICS_LINES_H_
#define FERRY_COORDINATOR_METRICS_LINES_H_

#include <optional>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "common/training_metrics.h"
#include "coordinator/membership.h"
#include "coordinator/step_table.h"

namespace ferry {

class MetricsLines {
 public:
  // One line: a step's or an evaluation's (exactly one is set).
  using Point =
      std::pair<std::optional<StepMetrics>, std::optional<EvalMetrics>>;

  void AddStep(StepMetrics m) {
    points_.emplace_back(std::move(m), std::nullopt);
  }
  void AddEval(EvalMetrics m) {
    points_.emplace_back(std::nullopt, std::move(m));
  }
  // The queued points, oldest first; the queue is empty after.
  std::vector<Point> Take();

  // The step_seconds of a step that began at `began` and ended at `ended`
  // (workers' clocks): from the latest end seen before, the first step
  // from its own beginning, so that the lines' step_seconds add up to the
  // throughput window's span. Remembers the later end.
  double StepSeconds(absl::Time began, absl::Time ended);

 private:
  std::vector<Point> points_;
  std::optional<absl::Time> last_step_end_;
};

// Adds to `m` the cumulative byte counts of every worker, those that left
// included (bytes_*, data_/control_bytes_* by the peer role "coordinator",
// peers, bytes_workers): for `step`'s reporters as of their report of it
// (`step` may be null), for the others their latest. Workers that sent and
// received nothing are not counted.
void AddWorkerBytes(StepMetrics& m, const OpenStep* step,
                    const Membership& membership);

}  // namespace ferry

#endif  // FERRY_COORDINATOR_METRICS_LINES_H_

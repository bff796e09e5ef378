// JobProgress: the job's progress figures that the workers' reports and
// the applied steps add up to: samples applied since the job began
// (restarts included), the recent training loss, compute and comm seconds,
// unique ids (CTR jobs), the pipeline figures per stage, the throughput
// window (every applied step or task timed by the workers' clocks: the one
// definition of samples/s), the ring's weight digest comparisons and the
// coordinator's own byte counts. It fills its part of StatusResponse and
// of the saved state.
//
// Ownership: plain value type.
// Thread safety: not thread-safe. The Coordinator holds it as a field
// guarded by its mutex (ABSL_GUARDED_BY(mu_)).
#ifndef FERRY_COORDINATOR_JOB_PROGRESS_H_
#define FERRY_COORDINATOR_JOB_PROGRESS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "common/throughput_window.h"
#include "ferry/v1/coordinator.pb.h"
#include "ferry/v1/coordinator_state.pb.h"

namespace ferry {

class JobProgress {
 public:
  // `pipeline_stages`: the job's (JobSpec.pipeline_stages); a report's
  // pipeline figures must name one of them, or the whole model alone.
  explicit JobProgress(int pipeline_stages)
      : pipeline_stages_(pipeline_stages) {}

  // Adds a worker's report: its compute and comm seconds, unique ids and
  // pipeline figures, and (a report with samples that did not fail) its
  // mean loss to the recent loss (an exponential average, 0.1 per report).
  // INVALID_ARGUMENT, nothing added, for pipeline figures that are not a
  // stage of the job's or hold negative or non-finite values.
  absl::Status AddReport(const v1::StepReport& done);
  // Two members' weight digests (or range digests) were compared.
  void CountDigest(bool equal);
  // `samples` of an applied step or task.
  void AddApplied(int64_t samples) { samples_applied_ += samples; }
  // An applied step (async: task) as its workers' clocks timed it.
  void AddTimed(const TimedStep& step) { window_.Add(step); }
  // A rollback undid `samples` applied samples: off the total and the
  // window's count.
  void TakeBack(int64_t samples);
  // The coordinator's own traffic with peers of `role`.
  void CountBytes(const std::string& role, int64_t sent, int64_t received);

  int64_t samples_applied() const { return samples_applied_; }
  const ThroughputWindow& window() const { return window_; }
  const v1::ByteCounts& own_bytes() const { return own_bytes_; }

  // StatusResponse: the loss, the window's figures, startup_seconds (from
  // the job's start at `start_unix` seconds to the first step's end), the
  // totals, the pipeline figures, the digests and coordinator_bytes.
  void FillStatus(v1::StatusResponse& status, double start_unix) const;
  // CoordinatorState: everything but the recent loss and the byte counts,
  // which start again after a restart.
  void SaveTo(v1::CoordinatorState& state) const;
  void LoadFrom(const v1::CoordinatorState& state);

 private:
  const int pipeline_stages_;
  int64_t samples_applied_ = 0;
  double recent_loss_ = 0.0;
  double compute_seconds_ = 0.0;
  double comm_seconds_ = 0.0;
  int64_t unique_ids_ = 0;  // CTR jobs, all reports
  // StatusResponse.pipeline summed per role, keyed (alone, stage): the
  // stages in order, then the members alone.
  std::map<std::pair<bool, int>, v1::PipelineStageTotals> pipeline_totals_;
  ThroughputWindow window_;
  // Ring mode: weight digests compared, and found different.
  int64_t digest_checks_ = 0;
  int64_t digest_mismatches_ = 0;
  v1::ByteCounts own_bytes_;  // by peer role
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_JOB_PROGRESS_H_

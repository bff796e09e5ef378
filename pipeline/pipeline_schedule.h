// The order in which one pipeline stage runs a step's micro-batches, and what
// that order costs: pure functions, no threads, no time.
//
// A step of a P-stage pipeline over M micro-batches runs, on stage s, a
// forward op F(m) for every micro-batch (it needs stage s-1's F(m) output)
// and a backward op B(m) (it needs stage s+1's B(m) input gradient and the
// stage's own F(m)). Schedules (Huang et al., GPipe; Narayanan et al.,
// PipeDream-Flush / 1F1B):
//  - kGPipe: F(0..M-1), then B(M-1..0). Every micro-batch's activations are
//    held until its backward: M sets in flight.
//  - k1F1B: min(P-1-s, M) warm-up forwards, then one forward and one
//    backward alternately, then the remaining backwards. At most
//    min(P-s, M) sets in flight on stage s.
// Both leave the same bubble: with equal stage times every stage idles for
// (P-1) forward+backward slots of a step that lasts M+P-1 of them.
#ifndef FERRY_PIPELINE_PIPELINE_SCHEDULE_H_
#define FERRY_PIPELINE_PIPELINE_SCHEDULE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ferry {

enum class PipelineSchedule { kGPipe, k1F1B };
// "gpipe" or "1f1b"; INVALID_ARGUMENT naming both otherwise.
absl::StatusOr<PipelineSchedule> ParsePipelineSchedule(absl::string_view text);
const char* PipelineScheduleName(PipelineSchedule schedule);

struct PipelineOp {
  enum Kind { kForward, kBackward };
  Kind kind = kForward;
  int micro_batch = 0;
  bool operator==(const PipelineOp&) const = default;
};

// Stage `stage`'s ops of one step, in order: every micro-batch forward once
// and backward once after its forward. REQUIRES: 0 <= stage < stages,
// micro_batches >= 1.
std::vector<PipelineOp> StageOps(PipelineSchedule schedule, int stages,
                                 int stage, int micro_batches);

// The largest number of micro-batches whose activations stage `stage` holds
// at once under `schedule` (forwarded, not yet backwarded).
int PeakMicroBatchesInFlight(PipelineSchedule schedule, int stages, int stage,
                             int micro_batches);

// The bubble with equal stages: (P-1)/(M+P-1), the share of a step each
// stage idles. 0 for one stage.
double PredictedBubble(int stages, int micro_batches);

// A step played out op by op: stage s's forward of one micro-batch takes
// forward_seconds[s], its backward backward_seconds[s], and a transfer
// between neighbours transfer_seconds (either direction); every stage runs
// its StageOps in order, each op as soon as its inputs are there and its
// device is free. `devices` (empty: one device per stage) names the device
// of each stage: stages that share one (two stages on one GPU) run one op
// at a time between them, the op that can start first going first, so
// their step is at least the sum of their busy times.
struct PipelineTimeline {
  double step_seconds = 0.0;         // the last op's end
  std::vector<double> busy_seconds;  // per stage: the sum of its ops
  std::vector<double> idle_seconds;  // per stage: step_seconds - busy
  double bubble = 0.0;               // mean idle share over the stages
};
// INVALID_ARGUMENT when the spans' sizes differ from `stages`, a time is
// negative, stages < 1 or micro_batches < 1.
absl::StatusOr<PipelineTimeline> SimulatePipeline(
    PipelineSchedule schedule, int micro_batches,
    absl::Span<const double> forward_seconds,
    absl::Span<const double> backward_seconds, double transfer_seconds,
    absl::Span<const int> devices = {});

}  // namespace ferry

#endif  // FERRY_PIPELINE_PIPELINE_SCHEDULE_H_

#include "pipeline/pipeline_schedule.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"

namespace ferry {

absl::StatusOr<PipelineSchedule> ParsePipelineSchedule(absl::string_view text) {
  if (text == "gpipe") return PipelineSchedule::kGPipe;
  if (text == "1f1b") return PipelineSchedule::k1F1B;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown pipeline schedule \"", text, "\" (use gpipe or 1f1b)"));
}

const char* PipelineScheduleName(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::kGPipe ? "gpipe" : "1f1b";
}

std::vector<PipelineOp> StageOps(PipelineSchedule schedule, int stages,
                                 int stage, int micro_batches) {
  std::vector<PipelineOp> ops;
  const auto forward = [&](int m) { ops.push_back({PipelineOp::kForward, m}); };
  const auto backward = [&](int m) {
    ops.push_back({PipelineOp::kBackward, m});
  };
  if (schedule == PipelineSchedule::kGPipe) {
    for (int m = 0; m < micro_batches; ++m) forward(m);
    for (int m = micro_batches - 1; m >= 0; --m) backward(m);
    return ops;
  }
  const int warm_up = std::min(stages - 1 - stage, micro_batches);
  for (int m = 0; m < warm_up; ++m) forward(m);
  for (int m = warm_up; m < micro_batches; ++m) {
    forward(m);
    backward(m - warm_up);
  }
  for (int m = micro_batches - warm_up; m < micro_batches; ++m) backward(m);
  return ops;
}

int PeakMicroBatchesInFlight(PipelineSchedule schedule, int stages, int stage,
                             int micro_batches) {
  int held = 0;
  int peak = 0;
  for (const PipelineOp& op :
       StageOps(schedule, stages, stage, micro_batches)) {
    held += op.kind == PipelineOp::kForward ? 1 : -1;
    peak = std::max(peak, held);
  }
  return peak;
}

double PredictedBubble(int stages, int micro_batches) {
  return static_cast<double>(stages - 1) / (micro_batches + stages - 1);
}

absl::StatusOr<PipelineTimeline> SimulatePipeline(
    PipelineSchedule schedule, int micro_batches,
    absl::Span<const double> forward_seconds,
    absl::Span<const double> backward_seconds, double transfer_seconds,
    absl::Span<const int> devices) {
  const int stages = static_cast<int>(forward_seconds.size());
  if (stages < 1 || micro_batches < 1 ||
      static_cast<int>(backward_seconds.size()) != stages ||
      (!devices.empty() && static_cast<int>(devices.size()) != stages)) {
    return absl::InvalidArgumentError(
        "pipeline simulation: one forward and one backward time (and at most "
        "one device) per stage, and at least one micro-batch");
  }
  for (int s = 0; s < stages; ++s) {
    if (forward_seconds[s] < 0 || backward_seconds[s] < 0) {
      return absl::InvalidArgumentError(
          "pipeline simulation: times must be >= 0");
    }
  }
  if (transfer_seconds < 0) {
    return absl::InvalidArgumentError(
        "pipeline simulation: times must be >= 0");
  }
  // The device each stage runs on; without a list, one each.
  std::vector<int> device(stages);
  for (int s = 0; s < stages; ++s) device[s] = devices.empty() ? s : devices[s];
  std::vector<std::vector<PipelineOp>> ops;
  for (int s = 0; s < stages; ++s) {
    ops.push_back(StageOps(schedule, stages, s, micro_batches));
  }
  // done[kind][s][m]: when stage s finished op (kind, m); < 0 while not yet.
  std::vector<std::vector<std::vector<double>>> done(
      2, std::vector<std::vector<double>>(
             stages, std::vector<double>(micro_batches, -1.0)));
  std::vector<size_t> next(stages, 0);
  std::vector<double> free_at(stages, 0.0);
  std::map<int, double> device_free_at;
  PipelineTimeline t;
  t.busy_seconds.assign(stages, 0.0);
  size_t remaining = 0;
  for (const auto& o : ops) remaining += o.size();
  // List scheduling: of the stages whose next op has its input, the op that
  // can start first runs next (a stage's ops in order; one op at a time on
  // a device). With a device per stage the order does not change the times.
  while (remaining > 0) {
    int pick = -1;
    double pick_start = 0.0;
    for (int s = 0; s < stages; ++s) {
      if (next[s] >= ops[s].size()) continue;
      const PipelineOp& op = ops[s][next[s]];
      const bool fwd = op.kind == PipelineOp::kForward;
      double ready = 0.0;
      const int from = fwd ? s - 1 : s + 1;
      if (from >= 0 && from < stages) {
        const double input = done[fwd ? 0 : 1][from][op.micro_batch];
        if (input < 0) continue;  // its input is not there yet
        ready = input + transfer_seconds;
      }
      const double start =
          std::max({ready, free_at[s], device_free_at[device[s]]});
      if (pick < 0 || start < pick_start) {
        pick = s;
        pick_start = start;
      }
    }
    if (pick < 0) {
      return absl::InternalError("pipeline simulation: the schedule deadlocks");
    }
    const PipelineOp& op = ops[pick][next[pick]];
    const bool fwd = op.kind == PipelineOp::kForward;
    const double took = fwd ? forward_seconds[pick] : backward_seconds[pick];
    const double end = pick_start + took;
    done[fwd ? 0 : 1][pick][op.micro_batch] = end;
    free_at[pick] = end;
    device_free_at[device[pick]] = end;
    t.busy_seconds[pick] += took;
    ++next[pick];
    --remaining;
  }
  t.step_seconds = *std::max_element(free_at.begin(), free_at.end());
  double idle_share = 0.0;
  for (int s = 0; s < stages; ++s) {
    t.idle_seconds.push_back(t.step_seconds - t.busy_seconds[s]);
    if (t.step_seconds > 0) idle_share += t.idle_seconds[s] / t.step_seconds;
  }
  t.bubble = idle_share / stages;
  return t;
}

}  // namespace ferry

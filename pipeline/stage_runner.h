// One pipeline stage's part of one training step: its schedule's forward and
// backward ops over the step's micro-batches, activations and gradients
// exchanged through a StageLink, parameter gradients summed over the
// micro-batches. No threads of its own: each stage's runner is called on its
// own thread (or process), and the stages meet through their links.
//
// The micro-batches are consecutive rows of the replica's batch
// (MicroBatchRows): micro-batch m's dropout masks are keyed by
// context.first_sample + its first row, so the summed gradient equals the
// unsplit batch's (up to float summation order), BatchNorm aside (it uses
// each micro-batch's statistics, as GPipe does).
#ifndef FERRY_PIPELINE_STAGE_RUNNER_H_
#define FERRY_PIPELINE_STAGE_RUNNER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/clock.h"
#include "model/pipeline_stage.h"
#include "pipeline/pipeline_schedule.h"
#include "pipeline/stage_link.h"

namespace ferry {

// Rows [first, first + count) of a batch cut into `micro_batches` parts whose
// sizes differ by at most one (the first batch % micro_batches parts have
// one more). REQUIRES: 1 <= micro_batches <= batch, 0 <= micro < micro_batches.
struct RowRange {
  int first = 0;
  int count = 0;
  bool operator==(const RowRange&) const = default;
};
RowRange MicroBatchRows(int batch, int micro_batches, int micro);

struct StageStepInput {
  int64_t step = 0;
  StepContext context;  // of the batch's row 0
  int batch = 0;        // rows of the replica's batch
  int micro_batches = 1;
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  // First stage: the batch's inputs, [batch, input_elements()].
  absl::Span<const float> inputs;
  // Last stage: the batch's labels.
  absl::Span<const int32_t> labels;
  float grad_scale = 1.0f;  // gradients are grad_scale x d(sum of losses)
  absl::Duration receive_timeout = absl::Seconds(60);
};

struct StageStepResult {
  LossStats loss;  // last stage: summed over the micro-batches
  // Time in ops (compute, copies and sends) and waiting for receives, by
  // the runner's clock; step = from the call to its return.
  double busy_seconds = 0.0;
  double wait_seconds = 0.0;
  double step_seconds = 0.0;
  int peak_micro_batches_in_flight = 0;
  int64_t activation_bytes = 0;  // the stage's activation buffers after it
  int64_t bytes_sent = 0;        // through the link during the step
  int64_t bytes_received = 0;
};

// Runs stage `stage_index` of `stages` for one step. `params` and `grads`
// are the stage's (PipelineStage: param_count() floats in backend memory);
// grads are overwritten with the step's sum. Errors: INVALID_ARGUMENT for
// micro_batches outside [1, batch] or inputs / labels of the wrong size;
// the link's errors (DEADLINE_EXCEEDED, UNAVAILABLE, ABORTED: a neighbour
// was lost, the step must be re-formed) and the stage's. On error `grads`
// is unspecified.
absl::StatusOr<StageStepResult> RunStageStep(
    PipelineStage& stage, int stage_index, int stages, StageLink& link,
    const float* params, float* grads, const StageStepInput& in, Clock& clock);

// One evaluation batch through `stage`: the evaluation forward
// pass (dropout off, BatchNorm on running statistics), activations sent on
// under `key` (a step number no training step of the link uses) as
// micro-batch 0. The last stage returns the batch's loss sum and correct
// count; the others an empty LossStats. `inputs` (first stage) and
// `labels` (last stage) as for RunStageStep, micro_batches ignored.
absl::StatusOr<LossStats> RunStageEval(PipelineStage& stage, StageLink& link,
                                       const float* params, int64_t key,
                                       const StageStepInput& in);

}  // namespace ferry

#endif  // FERRY_PIPELINE_STAGE_RUNNER_H_

#include "pipeline/stage_runner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ferry {
namespace {

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

// The first stage's inputs and the last stage's labels are the batch's.
absl::Status CheckRows(const PipelineStage& stage, const StageStepInput& in) {
  if (in.batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline step: batch must be >= 1, got ", in.batch));
  }
  if (stage.is_first() && static_cast<int64_t>(in.inputs.size()) !=
                              in.batch * stage.input_elements()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline step: expected ", in.batch, " x ", stage.input_elements(),
        " input values, got ", in.inputs.size()));
  }
  if (stage.is_last() && static_cast<int>(in.labels.size()) != in.batch) {
    return absl::InvalidArgumentError(absl::StrCat("pipeline step: expected ",
                                                   in.batch, " labels, got ",
                                                   in.labels.size()));
  }
  return absl::OkStatus();
}

}  // namespace

RowRange MicroBatchRows(int batch, int micro_batches, int micro) {
  const int base = batch / micro_batches;
  const int extra = batch % micro_batches;
  return {micro * base + std::min(micro, extra), base + (micro < extra)};
}

absl::StatusOr<StageStepResult> RunStageStep(
    PipelineStage& stage, int stage_index, int stages, StageLink& link,
    const float* params, float* grads, const StageStepInput& in, Clock& clock) {
  if (in.micro_batches < 1 || in.micro_batches > in.batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("micro-batches must be in [1, batch = ", in.batch,
                     "], got ", in.micro_batches));
  }
  RETURN_IF_ERROR(CheckRows(stage, in));
  const absl::Time start = clock.Now();
  const int64_t sent_before = link.bytes_sent();
  const int64_t received_before = link.bytes_received();
  StageStepResult result;
  // Activation slots: a forward takes the lowest free one, the backward of
  // the same micro-batch frees it.
  std::vector<int> slot_of(in.micro_batches, -1);
  std::vector<bool> slot_busy;
  int in_flight = 0;
  bool grads_written = false;
  std::vector<float> buffer;
  const auto wait = [&](auto receive) -> absl::StatusOr<std::vector<float>> {
    const absl::Time t = clock.Now();
    absl::StatusOr<std::vector<float>> got = receive();
    result.wait_seconds += Seconds(clock.Now() - t);
    return got;
  };
  for (const PipelineOp& op :
       StageOps(in.schedule, stages, stage_index, in.micro_batches)) {
    const int m = op.micro_batch;
    const RowRange rows = MicroBatchRows(in.batch, in.micro_batches, m);
    if (op.kind == PipelineOp::kForward) {
      int slot = 0;
      while (slot < static_cast<int>(slot_busy.size()) && slot_busy[slot]) {
        ++slot;
      }
      if (slot == static_cast<int>(slot_busy.size()))
        slot_busy.push_back(false);
      slot_busy[slot] = true;
      slot_of[m] = slot;
      result.peak_micro_batches_in_flight =
          std::max(result.peak_micro_batches_in_flight, ++in_flight);
      if (stage.is_first()) {
        RETURN_IF_ERROR(stage.SetInput(
            slot, rows.count,
            in.inputs.subspan(
                static_cast<size_t>(rows.first) * stage.input_elements(),
                static_cast<size_t>(rows.count) * stage.input_elements())));
      } else {
        ASSIGN_OR_RETURN(std::vector<float> x, wait([&] {
                           return link.ReceiveActivations(
                               in.step, m,
                               int64_t{rows.count} * stage.input_elements(),
                               in.receive_timeout);
                         }));
        RETURN_IF_ERROR(stage.SetInput(slot, rows.count, x));
      }
      const absl::Time t = clock.Now();
      StepContext context = in.context;
      context.first_sample += rows.first;
      RETURN_IF_ERROR(stage.Forward(slot, params, context));
      if (stage.is_last()) {
        ASSIGN_OR_RETURN(
            LossStats loss,
            stage.Loss(slot, in.labels.data() + rows.first, in.grad_scale));
        result.loss.loss_sum += loss.loss_sum;
        result.loss.correct += loss.correct;
      } else {
        RETURN_IF_ERROR(stage.CopyOutput(slot, buffer));
        RETURN_IF_ERROR(link.SendActivations(in.step, m, std::move(buffer)));
        buffer.clear();
      }
      result.busy_seconds += Seconds(clock.Now() - t);
      continue;
    }
    const int slot = slot_of[m];
    if (!stage.is_last()) {
      ASSIGN_OR_RETURN(std::vector<float> dy, wait([&] {
                         return link.ReceiveOutputGradient(
                             in.step, m,
                             int64_t{rows.count} * stage.output_elements(),
                             in.receive_timeout);
                       }));
      RETURN_IF_ERROR(stage.SetOutputGradient(slot, dy));
    }
    const absl::Time t = clock.Now();
    RETURN_IF_ERROR(stage.Backward(slot, params, grads, grads_written));
    grads_written = true;
    if (!stage.is_first()) {
      RETURN_IF_ERROR(stage.CopyInputGradient(slot, buffer));
      RETURN_IF_ERROR(link.SendInputGradient(in.step, m, std::move(buffer)));
      buffer.clear();
    }
    result.busy_seconds += Seconds(clock.Now() - t);
    slot_busy[slot] = false;
    --in_flight;
  }
  result.step_seconds = Seconds(clock.Now() - start);
  result.activation_bytes = stage.activation_bytes();
  result.bytes_sent = link.bytes_sent() - sent_before;
  result.bytes_received = link.bytes_received() - received_before;
  return result;
}

absl::StatusOr<LossStats> RunStageEval(PipelineStage& stage, StageLink& link,
                                       const float* params, int64_t key,
                                       const StageStepInput& in) {
  RETURN_IF_ERROR(CheckRows(stage, in));
  if (stage.is_first()) {
    RETURN_IF_ERROR(stage.SetInput(0, in.batch, in.inputs));
  } else {
    ASSIGN_OR_RETURN(std::vector<float> x,
                     link.ReceiveActivations(
                         key, 0, int64_t{in.batch} * stage.input_elements(),
                         in.receive_timeout));
    RETURN_IF_ERROR(stage.SetInput(0, in.batch, x));
  }
  RETURN_IF_ERROR(stage.ForwardEval(0, params));
  if (stage.is_last()) return stage.EvalLoss(0, in.labels.data());
  std::vector<float> y;
  RETURN_IF_ERROR(stage.CopyOutput(0, y));
  RETURN_IF_ERROR(link.SendActivations(key, 0, std::move(y)));
  return LossStats{};
}

}  // namespace ferry

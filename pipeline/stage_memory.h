// What one pipeline stage holds in its worker's memory, estimated from the
// model alone (pure), and the check of a job's stages against a per-worker
// memory budget: a model too large for one worker is refused with P = 1 and
// trains with more stages.
#ifndef FERRY_PIPELINE_STAGE_MEMORY_H_
#define FERRY_PIPELINE_STAGE_MEMORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/model_def.h"
#include "model/pipeline_split.h"
#include "pipeline/pipeline_schedule.h"

namespace ferry {

struct StageMemory {
  int64_t parameter_bytes = 0;  // the stage's parameters and state
  // Its gradient, plus the scratch a micro-batch's backward pass writes a
  // layer's gradient to before adding it (M > 1: the largest layer's).
  int64_t gradient_bytes = 0;
  int64_t optimizer_bytes = 0;  // optimizer state held by the worker
  // Every slot a schedule keeps in flight: its input, every layer's output
  // (views excepted), the output's gradient and (after the first stage)
  // the input's gradient, at the largest micro-batch's rows. Equals
  // PipelineStage::activation_bytes() once every slot held such a batch.
  int64_t activation_bytes = 0;
  // The backward pass's two gradient buffers, as wide as the widest
  // activation.
  int64_t workspace_bytes = 0;
  int64_t total() const {
    return parameter_bytes + gradient_bytes + optimizer_bytes +
           activation_bytes + workspace_bytes;
  }
};

// The estimate for stage `range` of `def` running micro-batches of at most
// `micro_rows` rows with `in_flight` of them held at once, and
// `optimizer_buffers` optimizer state buffers of the stage's size on the
// worker (0 with PS: the shards keep them; 1 momentum, 2 Adam in ring
// mode). INVALID_ARGUMENT for an invalid def or range, micro_rows or
// in_flight < 1, accumulate with micro_batches > 1.
absl::StatusOr<StageMemory> EstimateStageMemory(const ModelDef& def,
                                                StageRange range,
                                                int micro_rows, int in_flight,
                                                int optimizer_buffers,
                                                bool accumulates);

// "512MiB", "2GiB", "1.5GB", "300000000" (bytes) -> bytes; INVALID_ARGUMENT
// otherwise (the --worker-memory-budget flag).
absl::StatusOr<int64_t> ParseByteSize(const std::string& text);

// What CheckPipelineMemory's refusal proposes by default.
inline constexpr char kPipelineMemoryRemedy[] =
    "split it into more pipeline stages (--pipeline-stages), use more "
    "micro-batches (--micro-batches) or the 1f1b schedule, or raise "
    "--worker-memory-budget";

// Checks every stage of `split` running `batch` rows in `micro_batches`
// under `schedule` against `budget_bytes` (<= 0: no budget). OK, or
// RESOURCE_EXHAUSTED naming the first stage over it, its estimate by part,
// the budget, and `remedy`: what would fit it.
absl::Status CheckPipelineMemory(
    const ModelDef& def, const std::vector<StageRange>& split, int batch,
    int micro_batches, PipelineSchedule schedule, int optimizer_buffers,
    int64_t budget_bytes, absl::string_view remedy = kPipelineMemoryRemedy);

}  // namespace ferry

#endif  // FERRY_PIPELINE_STAGE_MEMORY_H_

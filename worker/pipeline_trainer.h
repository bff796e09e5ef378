// Pipeline-parallel training in one process: the model split into P stages
// (model/pipeline_split.h), each stage on its own thread with its own compute
// backend (on a GPU machine, GPU s % count), its own parameters, optimizer
// and state, the stages linked in memory (pipeline/in_memory_stage_link.h).
// Every step cuts the batch into micro-batches and runs the GPipe or 1F1B
// schedule; each stage then applies its optimizer to its own parameters. The
// optimizers are element-wise, so the result is the single-process
// trainer's (RunStandalone) up to float summation order, BatchNorm aside
// (it normalises per micro-batch). This is PyTorch's model-parallel and
// pipeline tutorials' layout; the data-parallel pipeline across worker
// processes (PS or ring per stage) is docs/pipeline.md's next step.
#ifndef FERRY_WORKER_PIPELINE_TRAINER_H_
#define FERRY_WORKER_PIPELINE_TRAINER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/progress.h"
#include "pipeline/pipeline_options.h"
#include "worker/standalone_trainer.h"

namespace ferry {

// Trains as RunStandalone does (same data order, initial values, schedule,
// evaluation after every epoch, --init-from / --export) with the model
// split into stages. The summary's `pipeline` holds the split and, per
// stage, busy / waiting seconds, its idle share, peak activation bytes and
// the bytes it sent and received; plus the predicted bubble.
// `memory_budget_bytes` (> 0; 0: none) bounds each stage, the whole model
// with one stage (pipeline/stage_memory.h CheckPipelineMemory), checked
// before anything is allocated.
// Errors: RunStandalone's; INVALID_ARGUMENT for a split the model cannot
// take or micro-batches outside [1, batch]; RESOURCE_EXHAUSTED when a stage
// exceeds the memory budget (nothing is trained).
absl::StatusOr<TrainSummary> RunPipelineStandalone(
    const TrainOptions& options, const PipelineOptions& pipeline,
    int64_t memory_budget_bytes, ProgressPrinter& progress);

}  // namespace ferry

#endif  // FERRY_WORKER_PIPELINE_TRAINER_H_

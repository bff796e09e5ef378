// ferry-worker --standalone: single-process training of any model family,
// the reference the distributed paths must reproduce. The options become a
// JobSpec, trained by the one standalone loop (worker/standalone_loop.h)
// with the job's LeaseTrainer, the trainer a distributed worker uses.
#ifndef FERRY_WORKER_STANDALONE_TRAINER_H_
#define FERRY_WORKER_STANDALONE_TRAINER_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/optimizer_config.h"
#include "common/progress.h"
#include "compute/compute_backend.h"
#include "ferry/v1/common.pb.h"
#include "model/embedding_options.h"
#include "pipeline/pipeline_options.h"
#include "worker/train_summary.h"

namespace ferry {

struct TrainOptions {
  std::string model = "784-256-128-10";
  std::string dataset = "fashion-mnist";
  std::string data_dir;  // empty: the dataset's default location
  OptimizerConfig optimizer;
  int batch = 128;
  int epochs = 15;
  uint64_t seed = 1;
  DeviceChoice device = DeviceChoice::kAuto;
  int threads = 1;
  int64_t max_steps = 0;  // > 0: stop after this many steps (tests, benches)
  // Non-empty: start from this model directory (model.json +
  // model.safetensors, model/model_export.h; a DLRM's export,
  // ps/dlrm_export.h) instead of the seed's initial values; its model must
  // be `model`.
  std::string init_from;
  // Non-empty: write the trained model there at the end.
  std::string export_dir;
  // Evaluate the starting weights on the test set and stop (no training).
  bool evaluate_only = false;
  // DLRM models: the embedding tables' options.
  EmbeddingOptions embedding;
  // Set: the model split into pipeline stages, all in this process
  // (worker/local_pipeline_trainer.h).
  std::optional<PipelineOptions> pipeline;
  // > 0: bound on each pipeline stage's memory (pipeline/stage_memory.h),
  // checked before anything is allocated; with no `pipeline`, one stage.
  int64_t memory_budget_bytes = 0;
};

// The job a standalone run of `options` trains. INVALID_ARGUMENT for bad
// options: batch or epochs <= 0, a model and dataset of different families
// (a DLRM trains on criteo:DIR only), a DLRM's evaluate_only without
// init_from, bad embedding options, a DLRM in pipeline stages,
// micro-batches outside [1, batch]; the model's parse errors.
absl::StatusOr<v1::JobSpec> StandaloneJob(const TrainOptions& options);

// Trains `options` and scores the test split after every epoch
// (evaluate_only: once, steps == 0). Errors: StandaloneJob's; RunLocalJob's
// (INVALID_ARGUMENT for an init_from model that is not `model`, NOT_FOUND /
// DATA_LOSS for missing or corrupt data or model files, UNAVAILABLE for
// --device cuda without a GPU, RESOURCE_EXHAUSTED for a pipeline stage over
// the memory budget, the file system's for an export that cannot be
// written).
absl::StatusOr<TrainSummary> RunStandalone(const TrainOptions& options,
                                           ProgressPrinter& progress);

}  // namespace ferry

#endif  // FERRY_WORKER_STANDALONE_TRAINER_H_

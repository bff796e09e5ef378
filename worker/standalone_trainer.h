// Single-process training: the reference that the distributed paths must
// reproduce (same sampler, same model, same optimizer code).
#ifndef FERRY_WORKER_STANDALONE_TRAINER_H_
#define FERRY_WORKER_STANDALONE_TRAINER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/optimizer_config.h"
#include "common/progress.h"
#include "compute/compute_backend.h"
#include "nlohmann/json.hpp"

namespace ferry {

struct TrainOptions {
  std::string model = "784-256-128-10";
  std::string dataset = "fashion-mnist";
  std::string data_dir;  // empty: the dataset's default location
  OptimizerConfig optimizer;
  int batch = 128;
  int epochs = 15;
  uint64_t seed = 1;
  bool shuffle = true;
  DeviceChoice device = DeviceChoice::kAuto;
  int threads = 1;
  int64_t max_steps = 0;  // > 0: stop after this many steps (tests, benches)
  // Non-empty: start from this model directory (model.json +
  // model.safetensors, model/model_export.h) instead of the seed's initial
  // values; its model must be `model` (CheckSameModel).
  std::string init_from;
  // Non-empty: write the trained model there at the end.
  std::string export_dir;
  // Evaluate the starting weights on the test set and stop (no training).
  bool evaluate_only = false;
};

struct EpochStats {
  int epoch = 0;
  double train_loss = 0.0;
  double train_accuracy = 0.0;
  double test_accuracy = 0.0;
  double seconds = 0.0;
};

struct TrainSummary {
  int epochs = 0;
  int64_t steps = 0;
  double wall_seconds = 0.0;
  double samples_per_second = 0.0;  // training samples / training time
  double test_accuracy = 0.0;
  double final_loss = 0.0;  // mean training loss of the last epoch
  std::string device;
  std::vector<EpochStats> per_epoch;
  std::vector<float> final_parameters;  // host copy, for tests and checks
  // Pipeline-parallel runs (worker/pipeline_trainer.h): the split and each
  // stage's figures; null otherwise.
  nlohmann::json pipeline;

  nlohmann::json ToJson() const;
};

// The trainers' epoch bookkeeping: appends epoch `epoch` (0-based) of
// `epochs` to summary.per_epoch from its training sums (`seen` samples,
// `train_seconds` of training, `seconds` in all) and its test accuracy, and
// prints its progress line.
void RecordEpoch(TrainSummary& summary, int epoch, int epochs, double loss_sum,
                 int64_t correct, int64_t seen, double test_accuracy,
                 double train_seconds, double seconds,
                 ProgressPrinter& progress);
// Sets epochs, test_accuracy, final_loss (the last epoch's) and
// samples_per_second. REQUIRES: at least one epoch recorded.
void CloseSummary(TrainSummary& summary, int64_t trained_samples,
                  double train_seconds);

// Trains and evaluates after every epoch (evaluate_only: evaluates once,
// steps == 0). Errors: INVALID_ARGUMENT for bad options or an init_from
// model that is not `model`, NOT_FOUND / DATA_LOSS for missing or corrupt
// data or model files, UNAVAILABLE for --device cuda without a GPU; the file
// system's for an export that cannot be written.
absl::StatusOr<TrainSummary> RunStandalone(const TrainOptions& options,
                                           ProgressPrinter& progress);

}  // namespace ferry

#endif  // FERRY_WORKER_STANDALONE_TRAINER_H_

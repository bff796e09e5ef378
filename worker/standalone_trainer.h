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

  nlohmann::json ToJson() const;
};

// Trains and evaluates after every epoch. Errors: INVALID_ARGUMENT for bad
// options, NOT_FOUND / DATA_LOSS for missing or corrupt data, UNAVAILABLE
// for --device cuda without a GPU.
absl::StatusOr<TrainSummary> RunStandalone(const TrainOptions& options,
                                           ProgressPrinter& progress);

}  // namespace ferry

#endif  // FERRY_WORKER_STANDALONE_TRAINER_H_

// TrainSummary: what a standalone run (worker/standalone_loop.h) reports,
// one shape for every model family: the loop's figures, the test scores of
// every epoch (accuracy and loss; a DLRM's AUC and log loss too) and the
// family's and trainer's own keys (a DLRM's tables, a pipeline's stages).
#ifndef FERRY_WORKER_TRAIN_SUMMARY_H_
#define FERRY_WORKER_TRAIN_SUMMARY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/progress.h"
#include "coordinator/shard_control.h"
#include "nlohmann/json.hpp"

namespace ferry {

struct EpochStats {
  int epoch = 0;                // 1-based
  double train_loss = 0.0;      // mean over the epoch's samples
  double train_accuracy = 0.0;  // classifiers (scores without AUC)
  TestScores test;
  double seconds = 0.0;             // training + evaluation
  double samples_per_second = 0.0;  // training only
};

struct TrainSummary {
  int epochs = 0;
  int64_t steps = 0;
  double wall_seconds = 0.0;
  double samples_per_second = 0.0;  // training samples / training time
  // The last evaluation's scores (evaluate_only: the only one).
  TestScores test;
  // Mean training loss of the last epoch (evaluate_only: the test loss).
  double final_loss = 0.0;
  // Models with embedding tables: distinct ids per step, over the tables.
  double unique_ids_per_step = 0.0;
  std::string device;
  std::vector<EpochStats> per_epoch;
  // The trained parameters (BatchNorm state left out), host copy.
  std::vector<float> final_parameters;
  // Keys of the model family (a DLRM's "embedding_rows", "embedding", ...)
  // and of the trainer (a pipeline's "pipeline"); null: none.
  nlohmann::json family;

  // Keys: epochs, steps, wall_seconds, samples_per_second, test_accuracy,
  // test_loss, final_loss, device, per_epoch (epoch, train_loss,
  // test_accuracy, test_loss, seconds, samples_per_second; train_accuracy
  // for classifiers), with AUC scores also test_auc and test_logloss (and
  // unique_ids_per_step at the top), plus `family`'s keys.
  nlohmann::json ToJson() const;
};

// Appends `stats` to summary.per_epoch and prints its progress line.
void RecordEpoch(TrainSummary& summary, const EpochStats& stats, int epochs,
                 ProgressPrinter& progress);

}  // namespace ferry

#endif  // FERRY_WORKER_TRAIN_SUMMARY_H_

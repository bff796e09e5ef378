// Single-process training of a DLRM CTR model (model/dlrm_spec.h) on Criteo
// TSV data (`--dataset criteo:DIR`, data/ctr_dataset.h): the reference the
// distributed sparse paths must reproduce. One CtrStep per batch
// (model/ctr_step.h); the dense parameters take the job's dense optimizer
// (compute/optimizer.h) on the mean gradient, the embedding rows live in one
// SparseStore (ps/sparse_store.h, one shard) and take its row-wise optimizer
// through ApplyStep (the mean over the batch), with admission, TTL and memory
// eviction as on the PS shards. After every epoch the test split is scored:
// AUC and log loss (data/ctr_metrics.h).
#ifndef FERRY_WORKER_CTR_TRAINER_H_
#define FERRY_WORKER_CTR_TRAINER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/file_system.h"
#include "common/progress.h"
#include "model/embedding_options.h"
#include "nlohmann/json.hpp"
#include "ps/sparse_store.h"
#include "worker/standalone_trainer.h"

namespace ferry {

struct CtrEpochStats {
  int epoch = 0;
  double train_loss = 0.0;  // mean binary cross-entropy of the epoch's batches
  double test_auc = 0.0;
  double test_logloss = 0.0;
  double seconds = 0.0;             // training + evaluation
  double samples_per_second = 0.0;  // training only
};

struct CtrTrainSummary {
  int epochs = 0;
  int64_t steps = 0;
  double wall_seconds = 0.0;
  double samples_per_second = 0.0;  // training samples / training time
  double test_auc = 0.0;
  double test_logloss = 0.0;
  double final_loss = 0.0;           // mean training loss of the last epoch
  double unique_ids_per_step = 0.0;  // mean over steps, summed over tables
  int64_t embedding_rows = 0;        // stored rows at the end
  int64_t dense_parameters = 0;
  std::string device;
  SparseStoreStats embedding;  // the store's counters at the end
  std::vector<CtrEpochStats> per_epoch;
  std::vector<float> final_parameters;  // dense, host copy

  nlohmann::json ToJson() const;
};

// Trains options.model (a DLRM, see IsDlrmModelText) on options.dataset
// ("criteo:DIR") with options' batch, epochs, seed, shuffle, dense optimizer,
// device, threads and max_steps, and the embedding options.
// init_from starts from a directory ExportDlrm wrote (ps/dlrm_export.h:
// dense weights and tables; ImportDlrm's errors, prefixed with the flag),
// evaluate_only (with init_from) evaluates it without training, and
// export_dir writes the trained model there at the end.
// Errors: INVALID_ARGUMENT for a dataset other than criteo:DIR, a spec whose
// dense_features / num_fields differ from Criteo's 13 / 26, evaluate_only
// without init_from, bad options;
// NOT_FOUND / DATA_LOSS from the data; UNAVAILABLE for --device cuda without
// a GPU.
absl::StatusOr<CtrTrainSummary> RunCtrStandalone(
    const TrainOptions& options, const EmbeddingOptions& embedding,
    ProgressPrinter& progress);

}  // namespace ferry

#endif  // FERRY_WORKER_CTR_TRAINER_H_

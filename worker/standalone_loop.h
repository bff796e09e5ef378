// The one standalone training loop: the job's LeaseTrainer (the same class a
// distributed worker trains with, worker/lease_trainer.h) driven by an
// in-process task source (worker/local_task_source.h: the leases a
// coordinator would hand the job's only worker) and an in-process exchange
// (worker/local_exchange.h: the optimizer applied locally, a DLRM's tables
// held locally). What depends on the model family, the starting weights,
// the tables, the test scores and the export, is the StandaloneModel's
// (worker/standalone_model.h); the loop itself does not branch on it:
//
//   for every epoch: train its leases in order (up to job.max_steps), then
//   score the test split on the weights; at the end export and summarize.
//
// The result is a distributed sync job's with the same global batch, up to
// float summation order: the same samples per step, 1/b scaling, optimizer
// code, schedule length and initial values.
#ifndef FERRY_WORKER_STANDALONE_LOOP_H_
#define FERRY_WORKER_STANDALONE_LOOP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/progress.h"
#include "compute/compute_backend.h"
#include "ferry/v1/common.pb.h"
#include "worker/lease_trainer.h"
#include "worker/train_summary.h"

namespace ferry {

struct LocalRunOptions {
  DeviceChoice device = DeviceChoice::kAuto;
  int threads = 1;
  // Score the starting weights and stop (no trainer is built).
  bool evaluate_only = false;
  // Non-empty: write the trained model there at the end.
  std::string export_dir;
};

// Trains `job` (its model, dataset, global_batch, epochs, max_steps, seed,
// optimizer, embedding and init_from; mode and shards are ignored) in this
// process. Errors: the StandaloneModel's and the trainer's Create errors,
// INTERNAL when the training loss stops being finite, the trainer's and
// the exchange's step errors, the file system's for the export.
absl::StatusOr<TrainSummary> RunLocalJob(const v1::JobSpec& job,
                                         const LocalRunOptions& options,
                                         ProgressPrinter& progress);

}  // namespace ferry

#endif  // FERRY_WORKER_STANDALONE_LOOP_H_

// StandaloneModel: what standalone training (worker/standalone_loop.h) does
// that depends on the model family, the parts a coordinator and its shards
// do in a distributed job: the starting weights (the seed's or
// --init-from's), the tables a DLRM's embedding rows live in, the test
// split's scores (the coordinator's evaluators: coordinator/
// test_set_evaluator.h for layer stacks, coordinator/ctr_test_evaluator.h
// for DLRMs), the export and the family's summary keys. The training itself
// is the job's LeaseTrainer's, whatever the family.
//
// Weights are the job's flat buffer on the host (JobDenseLayout: a layer
// stack's parameters then its BatchNorm state; a DLRM's dense parameters).
//
// Thread safety: not thread-safe.
#ifndef FERRY_WORKER_STANDALONE_MODEL_H_
#define FERRY_WORKER_STANDALONE_MODEL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/shard_control.h"
#include "ferry/v1/common.pb.h"
#include "nlohmann/json.hpp"
#include "ps/sparse_store.h"

namespace ferry {

class StandaloneModel {
 public:
  // The family of `job` (a DLRM when IsDlrmJob, else a layer stack): loads
  // its test split and, for a DLRM, makes its tables (job.embedding) and
  // reads --init-from's into them. Errors: INVALID_ARGUMENT for a model or
  // dataset that does not fit, a test split the evaluator refuses;
  // NOT_FOUND / DATA_LOSS from the data; --init-from's (prefixed with it).
  static absl::StatusOr<std::unique_ptr<StandaloneModel>> ForJob(
      const v1::JobSpec& job);
  virtual ~StandaloneModel() = default;

  // The starting weights: --init-from's (checked to be the job's model),
  // else the job's seed's.
  virtual absl::StatusOr<std::vector<float>> InitialWeights() = 0;
  // The tables the local exchange serves and updates; nullptr: none.
  virtual SparseStore* tables() { return nullptr; }
  // Scores the test split with `weights` (the tables' rows for a DLRM).
  virtual absl::StatusOr<TestScores> Evaluate(
      const std::vector<float>& weights) = 0;
  // Writes the model with `weights` to `dir` (model.json, model.safetensors;
  // a DLRM's tables too). The file system's errors.
  virtual absl::Status Export(const std::string& dir,
                              const std::vector<float>& weights) = 0;
  // Elements of `weights` that are trained parameters (the rest: state).
  virtual int64_t parameter_elements() const = 0;
  // What the startup line says of the model and its data.
  virtual std::string Describe() const = 0;
  // The family's keys of the run's summary (a DLRM's tables); null: none.
  virtual nlohmann::json SummaryJson() const { return nullptr; }
};

}  // namespace ferry

#endif  // FERRY_WORKER_STANDALONE_MODEL_H_

// The coordinator's evaluation of a flat parameter buffer on the test set
// (CPU backend, 1 thread), shared by the PS and ring controls.
//
// Thread safety: Evaluate() serializes callers.
#ifndef FERRY_COORDINATOR_TEST_SET_EVALUATOR_H_
#define FERRY_COORDINATOR_TEST_SET_EVALUATOR_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "compute/compute_backend.h"
#include "coordinator/shard_control.h"
#include "data/batch_stager.h"
#include "data/dataset.h"
#include "model/model_def.h"
#include "model/sequential_model.h"

namespace ferry {

class TestSetEvaluator {
 public:
  // INVALID_ARGUMENT for a bad model. `export_dir` non-empty: every
  // evaluated parameter buffer is also written there as a model directory
  // (model/model_export.h), replacing the previous one, before Evaluate
  // returns; so when a job has finished, the directory holds the model of
  // its final evaluation. A failed write is logged and leaves the
  // evaluation's result alone.
  static absl::StatusOr<std::unique_ptr<TestSetEvaluator>> Create(
      const ModelDef& model, Dataset test_set,
      const std::string& export_dir = "");

  // The job's flat buffer (model/model_params.h ModelJobLayout): the
  // model's parameters, then its BatchNorm state.
  int64_t num_parameters() const { return job_elements_; }
  const SequentialModel& model() const { return *model_; }

  // The accuracy and mean loss (no AUC) of `values` (num_parameters() host
  // floats: the parameters, and the running statistics BatchNorm evaluates
  // with).
  absl::StatusOr<TestScores> Evaluate(const float* values);

 private:
  TestSetEvaluator() = default;

  absl::Mutex mu_;
  ModelDef def_;
  int64_t job_elements_ = 0;
  std::string export_dir_;
  Dataset test_set_;
  std::unique_ptr<ComputeBackend> backend_;
  std::unique_ptr<SequentialModel> model_;
  std::unique_ptr<BatchStager> stager_;
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_TEST_SET_EVALUATOR_H_

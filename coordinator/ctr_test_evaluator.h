// The coordinator's evaluation of a DLRM (CTR) job on its test split
// (data/ctr_dataset.h): the dense parameters come as a flat host buffer (the
// shards' Pull), the embedding rows from an EmbeddingRowSource (the shards'
// PullRows, ps/ps_client.h ParameterClientRowSource), read batch by batch,
// one Read per batch of samples. CtrStep::Predict on a CPU backend (1
// thread); standalone training scores its test split with it too
// (worker/standalone_model.h).
//
// Thread safety: Evaluate() serializes callers.
#ifndef FERRY_COORDINATOR_CTR_TEST_EVALUATOR_H_
#define FERRY_COORDINATOR_CTR_TEST_EVALUATOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "compute/compute_backend.h"
#include "coordinator/shard_control.h"
#include "data/ctr_dataset.h"
#include "data/dataset.h"
#include "model/ctr_step.h"
#include "model/dlrm_spec.h"
#include "model/embedding_row_source.h"

namespace ferry {

// What a job is evaluated on: a dense model's test set, or a DLRM's test
// split of Criteo examples.
using JobTestSet = std::variant<Dataset, CtrDataset>;

class CtrTestEvaluator {
 public:
  // Samples scored per row read: 4096 x 26 ids, at most 6.8 MB of dim-16
  // rows in one PullRows.
  static constexpr int kDefaultBatch = 4096;

  // INVALID_ARGUMENT for a bad spec, one whose dense_features / num_fields
  // are not Criteo's 13 / 26, batch <= 0, or a test split without both a
  // click and a non-click (its AUC is undefined).
  static absl::StatusOr<std::unique_ptr<CtrTestEvaluator>> Create(
      const DlrmSpec& spec, CtrDataset test_set, int batch = kDefaultBatch);

  // Dense parameters of the job's flat buffer (DlrmParameterLayout).
  int64_t num_parameters() const { return num_parameters_; }
  const CtrDataset& test_set() const { return test_set_; }

  // Scores every test sample with the dense parameters `params`
  // (num_parameters() host floats) and the rows `rows` gives: the accuracy
  // (a click predicted when its probability is above 0.5), the log loss
  // and the AUC (data/ctr_metrics.h). The row source's errors come back
  // with their code, prefixed with the table (CtrStep); INTERNAL for a
  // probability that is not a number (diverged weights).
  absl::StatusOr<TestScores> Evaluate(const float* params,
                                      EmbeddingRowSource& rows);

 private:
  CtrTestEvaluator() = default;

  absl::Mutex mu_;
  int batch_ = kDefaultBatch;
  int64_t num_parameters_ = 0;
  CtrDataset test_set_;
  std::vector<int32_t> labels_;  // the test split's, in sample order
  // Declared before step_, which uses it: destroyed after it.
  std::unique_ptr<ComputeBackend> backend_;
  std::optional<CtrStep> step_ ABSL_GUARDED_BY(mu_);
  DeviceBuffer params_ ABSL_GUARDED_BY(mu_);
  CtrBatch staged_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> indices_ ABSL_GUARDED_BY(mu_);
  std::vector<float> probabilities_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_CTR_TEST_EVALUATOR_H_

// The coordinator's WeightsEvaluator for ring mode: there are no shards
// (steps are applied by the workers themselves, so the coordinator needs no
// ShardControl), and evaluation fetches the weights of a ring member
// (RingPeer.GetWeights, retried while the member has not published them yet)
// and runs them on the test set; a DLRM's embedding tables come in the same
// stream (every member holds them whole) and are scored from a copy.
//
// Thread safety: Evaluate and set_member_source may run concurrently.
#ifndef FERRY_COORDINATOR_RING_CONTROL_H_
#define FERRY_COORDINATOR_RING_CONTROL_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/byte_counter.h"
#include "coordinator/ctr_test_evaluator.h"
#include "coordinator/ring_weights_source.h"
#include "coordinator/shard_control.h"
#include "coordinator/test_set_evaluator.h"
#include "model/parameter_layout.h"
#include "ps/sparse_store.h"

namespace ferry {

class RingControl final : public WeightsEvaluator {
 public:
  using MemberSource = RingWeightsSource::MemberSource;

  // `test_set`: a Dataset for a dense model, a CtrDataset for a DLRM (its
  // tables come from the member with the dense weights). `export_dir`
  // (non-empty): every evaluated model is written there (a DLRM's with the
  // member's tables: ps/dlrm_export.h). INVALID_ARGUMENT for a bad job, a
  // test set of the other kind, or an export of full ring tables.
  static absl::StatusOr<std::unique_ptr<RingControl>> Create(
      const v1::JobSpec& job, JobTestSet test_set,
      const std::string& export_dir = "",
      absl::Duration fetch_timeout = absl::Seconds(30));

  // Must be set before the coordinator evaluates (i.e. right after the
  // coordinator is created).
  void set_member_source(MemberSource source) {
    weights_.set_member_source(std::move(source));
  }

  // Weights after >= min_version steps from the first member that has them
  // (RingWeightsSource::Fetch's errors).
  absl::StatusOr<TestScores> Evaluate(int64_t min_version) override;
  absl::StatusOr<TestScores> EvaluateAndNotify(
      int64_t min_version, absl::FunctionRef<void()> fetched) override;
  TransferBytes bytes() const { return weights_.bytes(); }

 private:
  RingControl(std::string job_id, absl::Duration fetch_timeout)
      : weights_(std::move(job_id), fetch_timeout) {}

  RingWeightsSource weights_;
  // One of the two: a dense model's, or a DLRM's with its tables' config.
  std::unique_ptr<TestSetEvaluator> evaluator_;
  std::unique_ptr<CtrTestEvaluator> ctr_evaluator_;
  SparseStoreConfig tables_;
  int64_t full_table_rows_ = 0;  // > 0: ids read modulo it
  std::string export_dir_;       // a DLRM's or a worker's model's; empty: none
  // A job whose model is its workers': its tensors, exported by name at
  // every evaluation point (nothing is scored).
  std::optional<ParameterLayout> worker_model_;
  DlrmSpec spec_;  // a DLRM's, for its export
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_RING_CONTROL_H_

// The coordinator's WeightsEvaluator for ring mode: there are no shards
// (steps are applied by the workers themselves, so the coordinator needs no
// ShardControl), and evaluation fetches the weights of a ring member
// (RingPeer.GetWeights, retried while the member has not published them yet)
// and runs them on the test set.
//
// Thread safety: Evaluate and set_member_source may run concurrently.
#ifndef FERRY_COORDINATOR_RING_CONTROL_H_
#define FERRY_COORDINATOR_RING_CONTROL_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/byte_counter.h"
#include "coordinator/shard_control.h"
#include "coordinator/test_set_evaluator.h"

namespace ferry {

class RingControl final : public WeightsEvaluator {
 public:
  // Returns the peer addresses of the current members, rank order.
  using MemberSource = std::function<std::vector<std::string>()>;

  // `export_dir` (non-empty): every evaluated model is written there
  // (TestSetEvaluator). INVALID_ARGUMENT for a bad job, and for a DLRM
  // (ring mode trains dense models only so far).
  static absl::StatusOr<std::unique_ptr<RingControl>> Create(
      const v1::JobSpec& job, Dataset test_set,
      const std::string& export_dir = "",
      absl::Duration fetch_timeout = absl::Seconds(30));

  // Must be set before the coordinator evaluates (i.e. right after the
  // coordinator is created).
  void set_member_source(MemberSource source);

  // Weights after >= min_version steps from the first member that has them.
  // DEADLINE_EXCEEDED when none could give them within fetch_timeout;
  // DATA_LOSS for a malformed weights stream.
  absl::StatusOr<TestScores> Evaluate(int64_t min_version) override;
  absl::StatusOr<TestScores> EvaluateAndNotify(
      int64_t min_version, absl::FunctionRef<void()> fetched) override;
  TransferBytes bytes() const { return counter_.Get(); }

 private:
  RingControl() = default;
  absl::Status Fetch(const std::string& address, int64_t min_step,
                     std::vector<float>& params);

  v1::JobSpec job_;
  absl::Duration fetch_timeout_;
  std::unique_ptr<TestSetEvaluator> evaluator_;
  ByteCounter counter_;
  absl::Mutex mu_;
  MemberSource members_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_RING_CONTROL_H_

// The coordinator's view of what holds the model, split by what each mode
// needs:
//  - WeightsEvaluator: evaluates the weights at a version on the test set
//    (both modes; ring mode needs nothing else: RingControl);
//  - ShardControl: PS mode's shards besides: finalizing a sync step over
//    its exact contributors, checkpoints, versions and restores
//    (GrpcShardControl).
// Calls come from the coordinator's own threads, never under its lock.
// Implementations must allow calls from several threads at once.
#ifndef FERRY_COORDINATOR_SHARD_CONTROL_H_
#define FERRY_COORDINATOR_SHARD_CONTROL_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ferry/v1/ps.pb.h"

namespace ferry {

// One evaluation of the weights on the test set.
struct TestScores {
  // Fraction of the samples right (CTR models: a click predicted when its
  // probability is above 0.5).
  double accuracy = 0;
  // Mean loss per sample (CTR models: the log loss).
  double loss = 0;
  // CTR models only: the ROC AUC of the click probabilities.
  std::optional<double> auc = std::nullopt;
  // Ring mode's CTR models: the evaluated member's embedding rows and
  // pending admission counters (the shards report theirs otherwise).
  std::optional<int64_t> embedding_rows = std::nullopt;
  std::optional<int64_t> embedding_pending_ids = std::nullopt;
};

class WeightsEvaluator {
 public:
  virtual ~WeightsEvaluator() = default;
  // Evaluates the weights at version >= min_version on the test set.
  // Errors: UNAVAILABLE / DEADLINE_EXCEEDED when the weights cannot be
  // fetched, DATA_LOSS for malformed weights.
  virtual absl::StatusOr<TestScores> Evaluate(int64_t min_version) = 0;

  // Evaluate(), calling `fetched` once the weights are in hand, before the
  // test-set pass (not at all when they could not be fetched), so that the
  // caller can let training go on during the pass. This default calls
  // `fetched` after the whole evaluation.
  virtual absl::StatusOr<TestScores> EvaluateAndNotify(
      int64_t min_version, absl::FunctionRef<void()> fetched) {
    auto result = Evaluate(min_version);
    if (result.ok()) fetched();
    return result;
  }
};

class ShardControl : public WeightsEvaluator {
 public:
  // Finalizes `step` over `contributors` on every shard. OK only when every
  // shard applied it (or had already, over the same set); UNAVAILABLE /
  // DEADLINE_EXCEEDED when a shard cannot be reached (the coordinator
  // retries); any other error starts a recovery: FAILED_PRECONDITION (a
  // shard lost the step), ALREADY_EXISTS (a shard applied it on push over
  // another set: the step is undone).
  virtual absl::Status FinalizeStep(
      int64_t step, int64_t generation,
      const std::vector<v1::Contributor>& contributors) = 0;
  // Checkpoints every shard at `version` (-1: each at its current one),
  // pruning none of the versions in `keep` (the job's complete
  // checkpoints). OK only when every shard's checkpoint is durable;
  // FAILED_PRECONDITION "no checkpoint directory" turns checkpoints off.
  virtual absl::Status Checkpoint(int64_t version,
                                  const std::vector<int64_t>& keep) = 0;
  // Every shard's current version, in shard order (UNAVAILABLE when one
  // cannot be reached).
  virtual absl::StatusOr<std::vector<int64_t>> Versions() = 0;
  // Brings every shard to `version` (RestoreRequest) and fences older
  // generations. FAILED_PRECONDITION when a shard has no checkpoint there.
  virtual absl::Status RestoreTo(int64_t version, int64_t generation) = 0;
  // Raises every shard's generation fence to `generation` (FenceRequest):
  // later pushes leased under older generations are ABORTED. OK when every
  // shard's fence is there; UNAVAILABLE / DEADLINE_EXCEEDED when one cannot
  // be reached (its next FinalizeStep raises it anyway).
  virtual absl::Status Fence(int64_t generation) = 0;
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_SHARD_CONTROL_H_

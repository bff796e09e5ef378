// PushLedger: which pushes a PS shard holds and which it has applied, so
// that each push counts once.
//  - Sync: the open step's contributions by worker (each push's own
//    gradient buffer, rows and the step set it named; nothing is summed on
//    arrival), and the contributor sets the last kRememberedSteps applied
//    steps were applied over (a retried push of an applied step, or a
//    FinalizeStep of it, is recognised by them).
//  - Async: each worker's last applied step (a push of a step at or below
//    it is a retry).
// The version and the limits are the caller's: each check takes them.
// Not thread-safe: the shard guards it with its mutex.
#ifndef FERRY_PS_PUSH_LEDGER_H_
#define FERRY_PS_PUSH_LEDGER_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/sharding.h"
#include "model/embedding_bag.h"
#include "ps/grad_buffer_pool.h"
#include "ps/step_contributors.h"

namespace ferry {

// One committed push of the open sync step.
struct PsContribution {
  int64_t num_samples = 0;
  std::vector<float> grad;
  std::vector<SparseRows> rows;
  std::vector<PsContributor> step_set;  // the push's step_contributors
  // Slice elements the push leaves out (a range set): no sample of it used
  // them (PushRequest.absent).
  std::vector<FlatRange> absent;
};

class PushLedger {
 public:
  // How many applied steps' contributor sets are remembered.
  static constexpr int64_t kRememberedSteps = 64;

  // `shard_id` names the shard in messages.
  explicit PushLedger(int32_t shard_id) : shard_id_(shard_id) {}

  // Sync: OK when `worker`'s push of `step` with `num_samples` may be held
  // while step `version` is open. ALREADY_EXISTS when the step was applied
  // over a set naming this push (a retry) or the worker holds a push of
  // the open step; FAILED_PRECONDITION for another step than `version`;
  // RESOURCE_EXHAUSTED when `max_pushes` pushes are held.
  absl::Status CheckSyncPush(const std::string& worker, int64_t step,
                             int64_t num_samples, int64_t version,
                             int64_t max_pushes) const;
  // Async: ALREADY_EXISTS when `step` is at or below the worker's last
  // applied step; RESOURCE_EXHAUSTED for a new worker when `max_workers`
  // are remembered.
  absl::Status CheckAsyncPush(const std::string& worker, int64_t step,
                              int64_t max_workers) const;
  void RecordAsyncStep(const std::string& worker, int64_t step) {
    last_step_[worker] = step;
  }

  // Holds `worker`'s push of the open step (replacing any it held).
  void Hold(const std::string& worker, PsContribution contribution) {
    held_[worker] = std::move(contribution);
  }
  int64_t held() const { return static_cast<int64_t>(held_.size()); }

  // True when every worker of `set` holds a push that names exactly `set`
  // with its own num_samples (finalize on push).
  bool StepComplete(absl::Span<const PsContributor> set) const;
  // OK when every contributor holds a push with its num_samples; else
  // FAILED_PRECONDITION (not pushed) or INVALID_ARGUMENT (other samples)
  // naming the first that does not. `step` is for messages.
  absl::Status CheckHeld(int64_t step,
                         absl::Span<const PsContributor> contributors) const;
  // A FinalizeStep of applied step `step`: ALREADY_EXISTS when it is
  // remembered as applied over another set than `contributors`.
  absl::Status CheckAppliedOver(
      int64_t step, absl::Span<const PsContributor> contributors) const;

  // REQUIRES: CheckHeld(contributors) is OK.
  // The contributors' rows, in their order.
  std::vector<const std::vector<SparseRows>*> RowsOf(
      absl::Span<const PsContributor> contributors);
  // Adds the contributors' gradients in their order into the first one's
  // buffer, divides the sum by `divisor` and returns it (the same values as
  // a sum from zero, then divided).
  std::vector<float>& SumInOrder(absl::Span<const PsContributor> contributors,
                                 float divisor);
  // The slice elements every one of `contributors` (each holding a push)
  // left out: the step's optimizer skips them.
  std::vector<FlatRange> AbsentInAll(
      absl::Span<const PsContributor> contributors) const;

  // Drops every held push, their buffers into `pool`.
  void DropHeld(GradBufferPool& pool);
  // Remembers that `step` was applied over `contributors`, forgetting the
  // oldest step beyond kRememberedSteps.
  void RememberApplied(int64_t step,
                       absl::Span<const PsContributor> contributors);
  // Back to `version`: drops every held push, forgets the async workers'
  // steps and the sets of steps at or after `version`.
  void RollBack(int64_t version, GradBufferPool& pool);

 private:
  // Sync: true when `step` was applied over a set naming `worker` with
  // `num_samples`.
  bool AppliedPush(const std::string& worker, int64_t step,
                   int64_t num_samples) const;

  const int32_t shard_id_;
  absl::flat_hash_map<std::string, PsContribution> held_;
  std::map<int64_t, std::vector<PsContributor>> applied_sets_;
  absl::flat_hash_map<std::string, int64_t> last_step_;
};

}  // namespace ferry

#endif  // FERRY_PS_PUSH_LEDGER_H_

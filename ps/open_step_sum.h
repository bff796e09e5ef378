// OpenStepSum: the open sync step's ArrivalSum (PsShardConfig.
// sum_on_arrival) behind its own lock, so that a push's chunks are summed
// without the shard's mutex.
//
// Contract:
//  - enabled() is fixed at construction; when false there is no sum: Add
//    and ApplyExactly must not be called, SummedExactly is true and
//    RollBack only records the epoch.
//  - Epochs: the shard counts its rollbacks; a push remembers the count at
//    BeginPush and Add refuses it (ABORTED) once RollBack has recorded a
//    later one or the sum has moved on to another step.
//  - Lock order: the shard's mutex, then this one (ApplyExactly and
//    RollBack are called under the shard's mutex; Add without it).
//
// Thread-safe.
#ifndef FERRY_PS_OPEN_STEP_SUM_H_
#define FERRY_PS_OPEN_STEP_SUM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/sharding.h"
#include "ps/arrival_sum.h"
#include "ps/step_contributors.h"

namespace ferry {

class OpenStepSum {
 public:
  // With `enabled`, sums over `owned` (the shard's chunks, flat order) in a
  // buffer of the slice [slice_begin, slice_begin + slice_size), from step
  // 0. `shard_id` names the shard in messages.
  OpenStepSum(bool enabled, int32_t shard_id, std::vector<Chunk> owned,
              int64_t slice_begin, int64_t slice_size);

  bool enabled() const { return enabled_; }

  // Sums `values` as `worker`'s owned chunk `index` of its push of `step`
  // with `num_samples`, begun at rollback epoch `epoch`. ABORTED when the
  // shard was rolled back since or the sum is of another step; else
  // ArrivalSum::Add's errors (a retried chunk is skipped: OK).
  absl::Status Add(const std::string& worker, int64_t step, int64_t num_samples,
                   uint64_t epoch, size_t index, absl::Span<const float> values)
      ABSL_LOCKS_EXCLUDED(mu_);

  // True when disabled, or when the sum holds exactly `set`'s pushes.
  bool SummedExactly(absl::Span<const PsContributor> set) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Runs `apply` on the sum, holding the lock throughout so that no chunk
  // joins it meanwhile, once it holds exactly `set`'s pushes; else returns
  // FAILED_PRECONDITION (prefixed by `what`) without calling it. `apply`
  // resets the sum for the step that follows. REQUIRES: enabled().
  absl::Status ApplyExactly(absl::string_view what,
                            absl::Span<const PsContributor> set,
                            absl::FunctionRef<absl::Status(ArrivalSum&)> apply)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Records rollback epoch `epoch` and restarts the sum at step `step`.
  void RollBack(uint64_t epoch, int64_t step) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const bool enabled_;
  const int32_t shard_id_;
  mutable absl::Mutex mu_;
  std::unique_ptr<ArrivalSum> sum_ ABSL_GUARDED_BY(mu_);  // null: disabled
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ferry

#endif  // FERRY_PS_OPEN_STEP_SUM_H_

// The data-task queue of one epoch: positions [0, num_samples) of the epoch's
// sample permutation, leased out as ranges and then either applied (the
// gradient was applied) or released (back to the queue, leased again later).
// Released ranges are leased before fresh ones. Every position is applied
// exactly once before the epoch is complete.
//
// Thread safety: not thread-safe; the coordinator serializes calls.
#ifndef FERRY_COORDINATOR_TASK_QUEUE_H_
#define FERRY_COORDINATOR_TASK_QUEUE_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ferry/v1/coordinator.pb.h"
#include "ferry/v1/coordinator_state.pb.h"

namespace ferry {

class EpochTaskQueue {
 public:
  EpochTaskQueue(int64_t epoch, int64_t num_samples)
      : epoch_(epoch), num_samples_(num_samples) {}

  // Leases up to `n` samples as one or more tasks (several when released
  // fragments are reused). Empty when nothing is left to lease.
  std::vector<v1::DataTask> Lease(int64_t n);
  // NOT_FOUND when the task is not currently leased (unknown, or already
  // applied or released): nothing changes then.
  absl::Status Applied(int64_t task_id);
  absl::Status Release(int64_t task_id);
  // Returns an applied task to the queue (its update was rolled back): it
  // is leased again before anything else (reclaim in reverse order to keep
  // the original order) and counts as released. INVALID_ARGUMENT for a task of
  // another epoch or outside the epoch.
  absl::Status Reclaim(const v1::DataTask& task);

  // Persistence (leased tasks stay leased: the caller releases them).
  v1::TaskQueueState ToProto() const;
  // INVALID_ARGUMENT for an inconsistent state.
  static absl::StatusOr<EpochTaskQueue> FromProto(
      const v1::TaskQueueState& state);

  int64_t epoch() const { return epoch_; }
  int64_t num_samples() const { return num_samples_; }
  int64_t remaining() const;  // samples not yet leased
  int64_t leased_samples() const;
  bool complete() const { return applied_ == num_samples_; }
  int64_t samples_applied() const { return applied_; }
  int64_t samples_released() const { return released_; }

 private:
  int64_t epoch_;
  int64_t num_samples_;
  int64_t cursor_ = 0;
  int64_t next_task_id_ = 0;
  int64_t applied_ = 0;
  int64_t released_ = 0;
  std::deque<v1::DataTask> returned_;  // released ranges, leased first
  absl::flat_hash_map<int64_t, v1::DataTask> leased_;
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_TASK_QUEUE_H_

// LocalTaskSource: the leases a coordinator would hand the only worker of a
// sync job, made in-process for standalone training (worker/standalone_loop.h).
// Step k of epoch e trains epoch positions [k * batch, min((k + 1) * batch,
// epoch_size)) of EpochPermutation(epoch_size, seed, e) (worker/lease_samples.h
// maps them to samples), steps numbered from 0 across epochs. Training ends
// after `epochs` epochs or, when max_steps > 0, after max_steps steps.
//
// Thread safety: not thread-safe.
#ifndef FERRY_WORKER_LOCAL_TASK_SOURCE_H_
#define FERRY_WORKER_LOCAL_TASK_SOURCE_H_

#include <cstdint>
#include <optional>

#include "ferry/v1/coordinator.pb.h"

namespace ferry {

class LocalTaskSource {
 public:
  // REQUIRES: epoch_size > 0, batch > 0.
  LocalTaskSource(int64_t epoch_size, int batch, int epochs, int64_t max_steps)
      : epoch_size_(epoch_size),
        batch_(batch),
        epochs_(epochs),
        max_steps_(max_steps) {}

  // Starts the next epoch (the first on the first call); false when training
  // is over (every epoch done, or max_steps reached).
  bool NextEpoch();
  // The current epoch's next TRAIN lease; nullopt at the epoch's end.
  std::optional<v1::NextTaskResponse> Next();

  int epoch() const { return epoch_; }  // 0-based; -1 before NextEpoch
  int epochs() const { return epochs_; }
  int64_t steps() const { return steps_; }  // leases handed out
  int64_t epoch_size() const { return epoch_size_; }
  // Epoch positions handed out in the current epoch.
  int64_t position() const { return position_; }

 private:
  bool StepsLeft() const { return max_steps_ <= 0 || steps_ < max_steps_; }

  const int64_t epoch_size_;
  const int batch_;
  const int epochs_;
  const int64_t max_steps_;
  int epoch_ = -1;
  int64_t position_ = 0;
  int64_t steps_ = 0;
};

}  // namespace ferry

#endif  // FERRY_WORKER_LOCAL_TASK_SOURCE_H_

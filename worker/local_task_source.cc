#include "worker/local_task_source.h"

#include <algorithm>

namespace ferry {

bool LocalTaskSource::NextEpoch() {
  if (epoch_ + 1 >= epochs_ || !StepsLeft()) return false;
  ++epoch_;
  position_ = 0;
  return true;
}

std::optional<v1::NextTaskResponse> LocalTaskSource::Next() {
  if (epoch_ < 0 || position_ >= epoch_size_ || !StepsLeft()) {
    return std::nullopt;
  }
  const int64_t end = std::min(epoch_size_, position_ + batch_);
  v1::NextTaskResponse lease;
  lease.set_action(v1::NextTaskResponse::TRAIN);
  lease.set_step(steps_);
  lease.set_pull_version(steps_);
  lease.set_epoch(epoch_);
  lease.set_epoch_size(epoch_size_);
  lease.set_step_samples(end - position_);
  v1::DataTask* task = lease.add_tasks();
  task->set_epoch(epoch_);
  task->set_task_id(steps_);
  task->set_begin(position_);
  task->set_end(end);
  position_ = end;
  ++steps_;
  return lease;
}

}  // namespace ferry

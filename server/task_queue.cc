#include "server/task_queue.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ferry {

std::vector<v1::DataTask> EpochTaskQueue::Lease(int64_t n) {
  std::vector<v1::DataTask> out;
  auto take = [&](int64_t begin, int64_t end) {
    v1::DataTask task;
    task.set_epoch(epoch_);
    task.set_task_id(next_task_id_++);
    task.set_begin(begin);
    task.set_end(end);
    leased_[task.task_id()] = task;
    out.push_back(task);
    n -= end - begin;
  };
  while (n > 0 && !returned_.empty()) {
    v1::DataTask& front = returned_.front();
    const int64_t end = std::min(front.end(), front.begin() + n);
    const int64_t begin = front.begin();
    if (end == front.end()) {
      returned_.pop_front();
    } else {
      front.set_begin(end);
    }
    take(begin, end);
  }
  if (n > 0 && cursor_ < num_samples_) {
    const int64_t end = std::min(num_samples_, cursor_ + n);
    const int64_t begin = cursor_;
    cursor_ = end;
    take(begin, end);
  }
  return out;
}

absl::Status EpochTaskQueue::Applied(int64_t task_id) {
  auto it = leased_.find(task_id);
  if (it == leased_.end()) {
    return absl::NotFoundError(absl::StrCat("task ", task_id, " of epoch ", epoch_,
                                            " is not leased"));
  }
  applied_ += it->second.end() - it->second.begin();
  leased_.erase(it);
  return absl::OkStatus();
}

absl::Status EpochTaskQueue::Release(int64_t task_id) {
  auto it = leased_.find(task_id);
  if (it == leased_.end()) {
    return absl::NotFoundError(absl::StrCat("task ", task_id, " of epoch ", epoch_,
                                            " is not leased"));
  }
  released_ += it->second.end() - it->second.begin();
  returned_.push_back(it->second);
  leased_.erase(it);
  return absl::OkStatus();
}

int64_t EpochTaskQueue::remaining() const {
  int64_t n = num_samples_ - cursor_;
  for (const v1::DataTask& t : returned_) n += t.end() - t.begin();
  return n;
}

int64_t EpochTaskQueue::leased_samples() const {
  int64_t n = 0;
  for (const auto& [id, t] : leased_) n += t.end() - t.begin();
  return n;
}

}  // namespace ferry

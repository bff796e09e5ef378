#include "coordinator/task_queue.h"

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
    return absl::NotFoundError(
        absl::StrCat("task ", task_id, " of epoch ", epoch_, " is not leased"));
  }
  applied_ += it->second.end() - it->second.begin();
  leased_.erase(it);
  return absl::OkStatus();
}

absl::Status EpochTaskQueue::Release(int64_t task_id) {
  auto it = leased_.find(task_id);
  if (it == leased_.end()) {
    return absl::NotFoundError(
        absl::StrCat("task ", task_id, " of epoch ", epoch_, " is not leased"));
  }
  released_ += it->second.end() - it->second.begin();
  returned_.push_back(it->second);
  leased_.erase(it);
  return absl::OkStatus();
}

absl::Status EpochTaskQueue::Reclaim(const v1::DataTask& task) {
  if (task.epoch() != epoch_ || task.begin() < 0 || task.end() > num_samples_ ||
      task.begin() >= task.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task ", task.task_id(), " of epoch ", task.epoch(), " [", task.begin(),
        ", ", task.end(), ") cannot be reclaimed in epoch ", epoch_));
  }
  const int64_t n = task.end() - task.begin();
  applied_ -= n;
  released_ += n;
  returned_.push_front(task);
  return absl::OkStatus();
}

v1::TaskQueueState EpochTaskQueue::ToProto() const {
  v1::TaskQueueState s;
  s.set_epoch(epoch_);
  s.set_num_samples(num_samples_);
  s.set_cursor(cursor_);
  s.set_next_task_id(next_task_id_);
  s.set_applied(applied_);
  s.set_released(released_);
  for (const v1::DataTask& t : returned_) *s.add_returned() = t;
  std::vector<v1::DataTask> leased;
  for (const auto& [id, t] : leased_) leased.push_back(t);
  std::sort(leased.begin(), leased.end(),
            [](const v1::DataTask& a, const v1::DataTask& b) {
              return a.begin() < b.begin();
            });
  for (const v1::DataTask& t : leased) *s.add_leased() = t;
  return s;
}

absl::StatusOr<EpochTaskQueue> EpochTaskQueue::FromProto(
    const v1::TaskQueueState& s) {
  int64_t returned = 0;
  for (const auto* list : {&s.returned(), &s.leased()}) {
    for (const v1::DataTask& t : *list) {
      if (t.begin() < 0 || t.begin() >= t.end() || t.end() > s.cursor() ||
          t.task_id() >= s.next_task_id()) {
        return absl::InvalidArgumentError(
            "saved task queue holds a task outside its range");
      }
      returned += t.end() - t.begin();
    }
  }
  if (s.num_samples() <= 0 || s.cursor() < 0 || s.cursor() > s.num_samples() ||
      s.applied() < 0 || s.applied() + returned != s.cursor()) {
    return absl::InvalidArgumentError(
        absl::StrCat("saved task queue of epoch ", s.epoch(),
                     " does not add up (", s.applied(), " applied + ", returned,
                     " returned or leased != cursor ", s.cursor(), ")"));
  }
  EpochTaskQueue q(s.epoch(), s.num_samples());
  q.cursor_ = s.cursor();
  q.next_task_id_ = s.next_task_id();
  q.applied_ = s.applied();
  q.released_ = s.released();
  for (const v1::DataTask& t : s.returned()) q.returned_.push_back(t);
  for (const v1::DataTask& t : s.leased()) q.leased_[t.task_id()] = t;
  return q;
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

#include "coordinator/step_table.h"

#include <algorithm>

namespace ferry {

OpenStep* StepTable::Find(int64_t step) {
  auto it = open_.find(step);
  return it == open_.end() ? nullptr : &it->second;
}

const OpenStep* StepTable::Find(int64_t step) const {
  auto it = open_.find(step);
  return it == open_.end() ? nullptr : &it->second;
}

int StepTable::Collecting() const {
  int collecting = 0;
  for (const auto& [number, step] : open_)
    collecting += step.finalizing ? 0 : 1;
  return collecting;
}

OpenStep& StepTable::Add(OpenStep step) {
  step.step = formed_;
  OpenStep& added = open_[formed_];
  added = std::move(step);
  ++formed_;
  return added;
}

bool StepTable::QueueIfReady(OpenStep& step, int64_t quorum) {
  if (step.finalizing || step.slots.empty()) return false;
  int64_t pushed = 0;
  for (const StepSlot& s : step.slots) pushed += s.pushed ? 1 : 0;
  const int64_t needed = quorum > 0
                             ? std::min<int64_t>(quorum, step.slots.size())
                             : static_cast<int64_t>(step.slots.size());
  if (pushed < needed) return false;
  step.finalizing = true;
  queue_.push_back(step.step);
  return true;
}

std::vector<OpenStep> StepTable::RemoveFrom(int64_t from,
                                            bool include_finalizing) {
  std::vector<OpenStep> removed;
  for (auto it = open_.lower_bound(from); it != open_.end();) {
    if (it->second.finalizing && !include_finalizing) {
      ++it;
      continue;
    }
    removed.push_back(std::move(it->second));
    it = open_.erase(it);
  }
  if (include_finalizing) {
    queue_.erase(std::remove_if(queue_.begin(), queue_.end(),
                                [&](int64_t s) { return s >= from; }),
                 queue_.end());
  }
  return removed;
}

int64_t StepTable::NextQueued() {
  std::sort(queue_.begin(), queue_.end());
  return queue_.front();
}

void StepTable::Dequeue(int64_t entry) {
  auto queued = std::find(queue_.begin(), queue_.end(), entry);
  if (queued != queue_.end()) queue_.erase(queued);
}

}  // namespace ferry

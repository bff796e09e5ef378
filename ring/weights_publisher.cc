#include "ring/weights_publisher.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace ferry {

absl::StatusOr<std::shared_ptr<const WeightsSnapshot>> WeightsPublisher::Get(
    int64_t min_step) {
  absl::MutexLock lock(&mu_);
  if (min_step > wanted_step_.load(std::memory_order_relaxed)) {
    wanted_step_.store(min_step, std::memory_order_release);  // under mu_
  }
  if (snapshot_ != nullptr && snapshot_->steps_applied >= min_step) {
    return snapshot_;
  }
  wanted_.store(true, std::memory_order_release);
  return absl::UnavailableError(absl::StrCat(
      "weights after step ", min_step, " ", kWeightsNotPublishedYet,
      " (newest: ",
      snapshot_ == nullptr ? std::string("none")
                           : absl::StrCat(snapshot_->steps_applied),
      "); retry"));
}

std::vector<float> PackRanges(const float* flat,
                              const std::vector<FlatRange>& ranges) {
  int64_t total = 0;
  for (const FlatRange& r : ranges) total += r.size();
  std::vector<float> packed;
  packed.reserve(static_cast<size_t>(total));
  for (const FlatRange& r : ranges) {
    packed.insert(packed.end(), flat + r.begin, flat + r.end);
  }
  return packed;
}

void WeightsPublisher::Publish(int64_t steps_applied, std::vector<float> values,
                               std::string tables,
                               std::vector<FlatRange> ranges,
                               int64_t total_elements) {
  int64_t covered = 0;
  for (const FlatRange& r : ranges) covered += r.size();
  if (total_elements < 0) total_elements = static_cast<int64_t>(values.size());
  const int64_t expected = ranges.empty() ? total_elements : covered;
  if (static_cast<int64_t>(values.size()) != expected ||
      (!ranges.empty() && ranges.back().end > total_elements)) {
    LogError("weights snapshot refused: its values are not its ranges' size",
             {{"values", static_cast<int64_t>(values.size())},
              {"expected", expected},
              {"total_elements", total_elements}});
    return;
  }
  auto snapshot = std::make_shared<WeightsSnapshot>();
  snapshot->steps_applied = steps_applied;
  snapshot->values = std::move(values);
  snapshot->total_elements = total_elements;
  snapshot->tables = std::move(tables);
  snapshot->ranges = std::move(ranges);
  absl::MutexLock lock(&mu_);
  snapshot_ = std::move(snapshot);
  wanted_.store(false, std::memory_order_release);
}

}  // namespace ferry

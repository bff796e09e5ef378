#include "ring/weights_publisher.h"

#include <utility>

#include "absl/strings/str_cat.h"

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
      "weights after step ", min_step, " are not published yet (newest: ",
      snapshot_ == nullptr ? std::string("none")
                           : absl::StrCat(snapshot_->steps_applied),
      "); retry"));
}

void WeightsPublisher::Publish(int64_t steps_applied, std::vector<float> values,
                               std::string tables,
                               std::vector<FlatRange> ranges) {
  auto snapshot = std::make_shared<WeightsSnapshot>();
  snapshot->steps_applied = steps_applied;
  snapshot->values = std::move(values);
  snapshot->tables = std::move(tables);
  snapshot->ranges = std::move(ranges);
  absl::MutexLock lock(&mu_);
  snapshot_ = std::move(snapshot);
  wanted_.store(false, std::memory_order_release);
}

}  // namespace ferry

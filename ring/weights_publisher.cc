#include "ring/weights_publisher.h"

#include <algorithm>
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
    lent_taken_ = true;  // (read only while lent)
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

void WeightsSnapshot::ReadValues(int64_t at, int64_t n,
                                 std::string* data) const {
  absl::MutexLock lock(&mu);
  const float* from = (lent != nullptr ? lent : values.data()) + at;
  data->assign(reinterpret_cast<const char*>(from),
               static_cast<size_t>(std::max<int64_t>(n, 0)) * sizeof(float));
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
  Unlend(snapshot_, /*replaced=*/true);
  snapshot_ = std::move(snapshot);
  wanted_.store(false, std::memory_order_release);
}

void WeightsPublisher::Lend(int64_t steps_applied, const float* flat,
                            int64_t total_elements, std::string tables) {
  auto snapshot = std::make_shared<WeightsSnapshot>();
  snapshot->steps_applied = steps_applied;
  snapshot->total_elements = total_elements;
  snapshot->tables = std::move(tables);
  {
    absl::MutexLock lock(&snapshot->mu);
    snapshot->lent = flat;
  }
  absl::MutexLock lock(&mu_);
  Unlend(snapshot_, /*replaced=*/true);
  snapshot_ = std::move(snapshot);
  lent_taken_ = false;
  wanted_.store(false, std::memory_order_release);
}

bool WeightsPublisher::Unlend(const std::shared_ptr<WeightsSnapshot>& snapshot,
                              bool replaced) {
  if (snapshot == nullptr) return false;
  absl::MutexLock snapshot_lock(&snapshot->mu);
  if (snapshot->lent == nullptr) return true;
  // No reader gets it while mu_ is held: a count of one is ours.
  if (snapshot.use_count() == 1 && (replaced || lent_taken_)) {
    snapshot->lent = nullptr;
    return false;
  }
  snapshot->values.assign(snapshot->lent,
                          snapshot->lent + snapshot->total_elements);
  snapshot->lent = nullptr;
  return true;
}

void WeightsPublisher::TakeBack() {
  absl::MutexLock lock(&mu_);
  if (!Unlend(snapshot_, /*replaced=*/false)) snapshot_.reset();
}

bool WeightsPublisher::lent() const {
  absl::MutexLock lock(&mu_);
  if (snapshot_ == nullptr) return false;
  absl::MutexLock snapshot_lock(&snapshot_->mu);
  return snapshot_->lent != nullptr;
}

}  // namespace ferry

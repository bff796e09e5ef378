#include "ring/bucket_reducer.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ferry {
namespace {

// OK when `plan`, sorted by offset (`by_offset`), partitions [0, total).
absl::Status CheckPlan(const std::vector<Bucket>& plan,
                       const std::vector<size_t>& by_offset, const float* grads,
                       int64_t* total) {
  int64_t end = 0;
  for (size_t i : by_offset) {
    const Bucket& b = plan[i];
    if (b.offset != end || b.length < 1 ||
        b.length > std::numeric_limits<int64_t>::max() - b.offset) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bucket plan is not a partition: bucket ", i, " [", b.offset, ", +",
          b.length, ") where offset ", end, " was expected"));
    }
    end = b.offset + b.length;
  }
  if (grads == nullptr && end > 0) {
    return absl::InvalidArgumentError("null gradient buffer");
  }
  *total = end;
  return absl::OkStatus();
}

}  // namespace

BucketAllReducer::BucketAllReducer(RingCollective* collective,
                                   std::vector<Bucket> plan, float* grads)
    : BucketAllReducer(collective, std::move(plan), grads,
                       GradientCompression{}, nullptr) {}

BucketAllReducer::BucketAllReducer(RingCollective* collective,
                                   std::vector<Bucket> plan, float* grads,
                                   GradientCompression compression,
                                   float* residual)
    : collective_(collective),
      plan_(std::move(plan)),
      grads_(grads),
      compression_(compression),
      residual_(compression.uses_feedback() ? residual : nullptr) {
  by_offset_.resize(plan_.size());
  for (size_t i = 0; i < plan_.size(); ++i) by_offset_[i] = i;
  std::stable_sort(
      by_offset_.begin(), by_offset_.end(),
      [this](size_t a, size_t b) { return plan_[a].offset < plan_[b].offset; });
  plan_status_ = CheckPlan(plan_, by_offset_, grads_, &total_);
  thread_ = std::thread([this] { Run(); });
}

BucketAllReducer::~BucketAllReducer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    queue_.clear();
  }
  thread_.join();
}

void BucketAllReducer::set_reduce_scatter(
    const std::vector<FlatRange>& slices) {
  shares_.clear();
  for (const Bucket& b : plan_) {
    shares_.push_back(SharesOfRange(slices, b.offset, b.offset + b.length));
  }
}

bool BucketAllReducer::HasWorkOrStopping() const {
  return stopping_ || !queue_.empty();
}

bool BucketAllReducer::Drained() const { return queue_.empty() && !busy_; }

void BucketAllReducer::Run() {
  mu_.Lock();
  while (true) {
    mu_.Await(absl::Condition(this, &BucketAllReducer::HasWorkOrStopping));
    if (stopping_) break;
    const size_t index = queue_.front();
    queue_.pop_front();
    if (!first_error_.ok()) continue;  // the ring is broken: skip the rest
    const Bucket bucket = plan_[index];
    const int64_t op_id = first_op_id_ + static_cast<int64_t>(index);
    busy_ = true;
    mu_.Unlock();
    const bool compress = bucket.offset < uncompressed_from_;
    absl::Status status =
        !shares_.empty()
            ? collective_->ReduceScatterSum(op_id, grads_ + bucket.offset,
                                            bucket.length, shares_[index])
            : collective_->AllReduceSumCompressed(
                  op_id, grads_ + bucket.offset, bucket.length,
                  compress ? compression_ : GradientCompression{},
                  residual_ == nullptr || !compress
                      ? nullptr
                      : residual_ + bucket.offset);
    mu_.Lock();
    busy_ = false;
    if (!status.ok() && first_error_.ok()) {
      first_error_ = absl::Status(
          status.code(),
          absl::StrCat("bucket ", index, " [", bucket.offset, ", ",
                       bucket.offset + bucket.length, "): ", status.message()));
    }
  }
  mu_.Unlock();
}

void BucketAllReducer::Start(int64_t first_op_id) {
  absl::MutexLock lock(&mu_);
  if (active_) mu_.Await(absl::Condition(this, &BucketAllReducer::Drained));
  active_ = true;
  first_op_id_ = first_op_id;
  declared_.clear();
  declared_elements_ = 0;
  remaining_.resize(plan_.size());
  for (size_t i = 0; i < plan_.size(); ++i) remaining_[i] = plan_[i].length;
  first_error_ = absl::OkStatus();
}

absl::Status BucketAllReducer::Ready(int64_t offset, int64_t length) {
  if (!plan_status_.ok()) return plan_status_;
  absl::MutexLock lock(&mu_);
  if (!active_) {
    return absl::FailedPreconditionError("Ready outside a step (no Start)");
  }
  if (offset < 0 || length < 0 || offset > total_ - length) {
    return absl::InvalidArgumentError(
        absl::StrCat("Ready range [", offset, ", +", length,
                     ") is outside the gradient buffer [0, ", total_, ")"));
  }
  if (length == 0) return absl::OkStatus();
  const int64_t end = offset + length;

  // Overlap with the declared range starting at or before offset, or with
  // the first one starting after it.
  auto next = declared_.upper_bound(offset);
  auto prev = next == declared_.begin() ? declared_.end() : std::prev(next);
  if ((prev != declared_.end() && prev->second > offset) ||
      (next != declared_.end() && next->first < end)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Ready range [", offset, ", ", end,
                     ") overlaps a range declared earlier in this step"));
  }
  // Insert, merging with adjacent ranges to keep the map small.
  int64_t begin = offset;
  int64_t new_end = end;
  if (prev != declared_.end() && prev->second == offset) {
    begin = prev->first;
    declared_.erase(prev);
  }
  if (next != declared_.end() && next->first == end) {
    new_end = next->second;
    declared_.erase(next);
  }
  declared_[begin] = new_end;
  declared_elements_ += length;

  // Buckets overlapping [offset, end) are a run of by_offset_, starting at
  // the last bucket whose offset is <= offset.
  auto first = std::upper_bound(
      by_offset_.begin(), by_offset_.end(), offset,
      [this](int64_t value, size_t i) { return value < plan_[i].offset; });
  std::vector<size_t> completed;
  for (auto it = std::prev(first);
       it != by_offset_.end() && plan_[*it].offset < end; ++it) {
    const Bucket& b = plan_[*it];
    const int64_t overlap =
        std::min(end, b.offset + b.length) - std::max(offset, b.offset);
    remaining_[*it] -= overlap;
    if (remaining_[*it] == 0) completed.push_back(*it);
  }
  std::sort(completed.begin(), completed.end());  // plan order
  queue_.insert(queue_.end(), completed.begin(), completed.end());
  return absl::OkStatus();
}

absl::Status BucketAllReducer::Finish() {
  if (!plan_status_.ok()) return plan_status_;
  absl::MutexLock lock(&mu_);
  if (!active_) {
    return absl::FailedPreconditionError("Finish outside a step (no Start)");
  }
  mu_.Await(absl::Condition(this, &BucketAllReducer::Drained));
  active_ = false;
  if (!first_error_.ok()) return first_error_;
  if (declared_elements_ < total_) {
    int64_t incomplete = 0;
    for (int64_t r : remaining_) incomplete += r > 0 ? 1 : 0;
    return absl::FailedPreconditionError(absl::StrCat(
        "Finish with ", total_ - declared_elements_, " of ", total_,
        " gradient elements never declared Ready; ", incomplete, " of ",
        plan_.size(), " buckets were not all-reduced"));
  }
  return absl::OkStatus();
}

}  // namespace ferry

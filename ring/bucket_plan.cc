#include "ring/bucket_plan.h"

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ferry {

absl::StatusOr<std::vector<Bucket>> PlanBuckets(
    const std::vector<int64_t>& tensor_sizes, int64_t bucket_elements) {
  if (bucket_elements <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bucket_elements must be >= 1, got ", bucket_elements));
  }
  int64_t total = 0;
  for (size_t t = 0; t < tensor_sizes.size(); ++t) {
    const int64_t size = tensor_sizes[t];
    if (size < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", t, " has negative size ", size));
    }
    if (size > std::numeric_limits<int64_t>::max() - total) {
      return absl::InvalidArgumentError("total tensor size overflows int64");
    }
    total += size;
  }

  std::vector<Bucket> plan;
  // The open bucket is [end - open, end); `end` walks down from total.
  int64_t end = total;
  int64_t open = 0;
  auto close = [&]() {
    if (open > 0) plan.push_back({end - open, open});
    end -= open;
    open = 0;
  };
  for (size_t t = tensor_sizes.size(); t-- > 0;) {
    int64_t size = tensor_sizes[t];
    if (open + size <= bucket_elements) {
      open += size;
      continue;
    }
    close();
    // Full pieces from the tensor's end backward; the remainder stays open.
    while (size > bucket_elements) {
      open = bucket_elements;
      close();
      size -= bucket_elements;
    }
    open = size;
  }
  close();
  return plan;
}

absl::StatusOr<std::vector<Bucket>> PlanBucketsWithState(
    const std::vector<int64_t>& tensor_sizes, int64_t bucket_elements,
    int64_t state_elements) {
  size_t split = tensor_sizes.size();
  int64_t tail = 0;
  while (split > 0 && tail < state_elements) tail += tensor_sizes[--split];
  if (tail != state_elements || state_elements < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("no trailing tensors hold exactly ", state_elements,
                     " state elements"));
  }
  const std::vector<int64_t> params(tensor_sizes.begin(),
                                    tensor_sizes.begin() + split);
  const std::vector<int64_t> state(tensor_sizes.begin() + split,
                                   tensor_sizes.end());
  ASSIGN_OR_RETURN(std::vector<Bucket> plan,
                   PlanBuckets(params, bucket_elements));
  ASSIGN_OR_RETURN(const std::vector<Bucket> state_plan,
                   PlanBuckets(state, bucket_elements));
  int64_t num_params = 0;
  for (int64_t size : params) num_params += size;
  for (Bucket b : state_plan) {
    b.offset += num_params;
    plan.push_back(b);
  }
  return plan;
}

}  // namespace ferry

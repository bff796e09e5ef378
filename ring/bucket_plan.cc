#include "ring/bucket_plan.h"

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

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

}  // namespace ferry

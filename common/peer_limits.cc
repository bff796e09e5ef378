#include "common/peer_limits.h"

#include "absl/strings/str_cat.h"

namespace ferry {

absl::Status LimitExceeded(absl::string_view what, int64_t value,
                           int64_t limit) {
  return absl::ResourceExhaustedError(
      absl::StrCat(what, " is ", value, "; the limit is ", limit));
}

absl::Status CheckIdLength(absl::string_view what, absl::string_view value) {
  const int64_t size = static_cast<int64_t>(value.size());
  if (size <= kMaxIdBytes) return absl::OkStatus();
  return LimitExceeded(absl::StrCat("the length of ", what, " in bytes"), size,
                       kMaxIdBytes);
}

}  // namespace ferry

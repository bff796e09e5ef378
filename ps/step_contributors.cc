#include "ps/step_contributors.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/peer_limits.h"
#include "common/status_macros.h"

namespace ferry {

absl::Status CheckStepContributors(absl::string_view what,
                                   absl::Span<const PsContributor> contributors,
                                   int64_t max_contributors) {
  if (contributors.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " names no contributor"));
  }
  const int64_t count = static_cast<int64_t>(contributors.size());
  if (count > max_contributors) {
    return LimitExceeded(absl::StrCat("the number of contributors of ", what),
                         count, max_contributors);
  }
  absl::flat_hash_set<absl::string_view> named;
  int64_t total = 0;
  for (const PsContributor& c : contributors) {
    RETURN_IF_ERROR(
        CheckIdLength(absl::StrCat("a contributor of ", what), c.worker_id));
    if (c.worker_id.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " names a contributor without a worker id"));
    }
    if (!named.insert(c.worker_id).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s names worker %s twice", what, c.worker_id));
    }
    if (c.num_samples < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: worker %s has %d samples, must be >= 0", what,
                          c.worker_id, c.num_samples));
    }
    total += c.num_samples;
  }
  if (total < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": its contributors have no samples"));
  }
  return absl::OkStatus();
}

bool SameContributors(absl::Span<const PsContributor> a,
                      absl::Span<const PsContributor> b) {
  if (a.size() != b.size()) return false;
  return std::all_of(a.begin(), a.end(), [&](const PsContributor& c) {
    return std::find(b.begin(), b.end(), c) != b.end();
  });
}

std::string DescribeContributors(absl::Span<const PsContributor> contributors) {
  return absl::StrJoin(contributors, ", ",
                       [](std::string* out, const PsContributor& c) {
                         absl::StrAppend(out, c.worker_id, ":", c.num_samples);
                       });
}

}  // namespace ferry

// A sync step's contributor set: who pushes a step and how many samples
// each one's gradient sums. The coordinator forms it (rank order); a
// FinalizeStep names the part of it that is applied, and a push may carry
// the whole of it so that the shard can apply the step by itself once every
// named contributor pushed (docs/protocol.md, "finalize on push").
#ifndef FERRY_PS_STEP_CONTRIBUTORS_H_
#define FERRY_PS_STEP_CONTRIBUTORS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace ferry {

struct PsContributor {
  std::string worker_id;
  int64_t num_samples = 0;

  friend bool operator==(const PsContributor&, const PsContributor&) = default;
};

// OK when `contributors` is a usable set for step `step`: not empty, at
// most `max_contributors`, no worker named twice, every worker id non-empty
// and at most kMaxIdBytes long, every num_samples >= 0 and at least one
// sample in all (a pipeline stage whose replica's samples another stage
// counts names 0: docs/pipeline.md). INVALID_ARGUMENT or
// RESOURCE_EXHAUSTED naming the problem (and `what`: "finalize of step 7",
// "push from w0") otherwise.
absl::Status CheckStepContributors(absl::string_view what,
                                   absl::Span<const PsContributor> contributors,
                                   int64_t max_contributors);

// The same workers with the same samples, in any order.
bool SameContributors(absl::Span<const PsContributor> a,
                      absl::Span<const PsContributor> b);

// "w0:64, w1:64", for messages.
std::string DescribeContributors(absl::Span<const PsContributor> contributors);

}  // namespace ferry

#endif  // FERRY_PS_STEP_CONTRIBUTORS_H_

// Sets of flat element ranges: sorted, disjoint, non-empty FlatRanges
// (common/sharding.h). They name the parameters a step's gradient leaves
// out ("absent": no sample of the step used them, as torch leaves such a
// parameter's .grad None), which the optimizer then skips. Pure functions.
#ifndef FERRY_COMMON_RANGE_SETS_H_
#define FERRY_COMMON_RANGE_SETS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/sharding.h"

namespace ferry {

// OK when `ranges` is a range set inside [0, limit): each begin < end,
// sorted, not touching or overlapping the one before (adjacent ranges are
// one range). INVALID_ARGUMENT naming `what` and the first bad range.
absl::Status CheckRangeSet(absl::Span<const FlatRange> ranges, int64_t limit,
                           absl::string_view what);

// The range set of `ranges` in any order, overlapping or adjacent allowed
// (empty ones dropped): sorted and merged.
std::vector<FlatRange> NormalizeRanges(std::vector<FlatRange> ranges);

// The elements in both range sets.
std::vector<FlatRange> IntersectRangeSets(absl::Span<const FlatRange> a,
                                          absl::Span<const FlatRange> b);

// The elements of [begin, end) in none of `ranges` (a range set), in order.
std::vector<FlatRange> ComplementRangeSet(absl::Span<const FlatRange> ranges,
                                          int64_t begin, int64_t end);

// The parts of `ranges` (a range set) inside [begin, end), shifted by
// -begin: a range set inside [0, end - begin).
std::vector<FlatRange> ClipRangeSet(absl::Span<const FlatRange> ranges,
                                    int64_t begin, int64_t end);

// A range set as pairs (begin0, end0, begin1, end1, ...), and back: the
// form protocol messages carry. FromRangePairs: INVALID_ARGUMENT (naming
// `what`) for an odd count or pairs that are not a range set inside
// [0, limit).
std::vector<int64_t> ToRangePairs(absl::Span<const FlatRange> ranges);
absl::Status FromRangePairs(absl::Span<const int64_t> pairs, int64_t limit,
                            absl::string_view what,
                            std::vector<FlatRange>* out);

}  // namespace ferry

#endif  // FERRY_COMMON_RANGE_SETS_H_

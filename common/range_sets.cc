#include "common/range_sets.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ferry {

absl::Status CheckRangeSet(absl::Span<const FlatRange> ranges, int64_t limit,
                           absl::string_view what) {
  int64_t after = -1;  // the end of the range before; -1: none yet
  for (const FlatRange& r : ranges) {
    std::string why;
    if (r.begin >= r.end) {
      why = "empty or reversed";
    } else if (r.begin < 0 || r.end > limit) {
      why = absl::StrCat("outside [0, ", limit, ")");
    } else if (r.begin <= after) {
      why = "not after the range before it";
    }
    if (!why.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": range [", r.begin, ", ", r.end, ") is ", why,
                       " (ranges must be sorted, disjoint and not adjacent)"));
    }
    after = r.end;
  }
  return absl::OkStatus();
}

std::vector<FlatRange> NormalizeRanges(std::vector<FlatRange> ranges) {
  std::erase_if(ranges, [](const FlatRange& r) { return r.begin >= r.end; });
  std::sort(
      ranges.begin(), ranges.end(),
      [](const FlatRange& a, const FlatRange& b) { return a.begin < b.begin; });
  std::vector<FlatRange> out;
  for (const FlatRange& r : ranges) {
    if (!out.empty() && r.begin <= out.back().end) {
      out.back().end = std::max(out.back().end, r.end);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

std::vector<FlatRange> IntersectRangeSets(absl::Span<const FlatRange> a,
                                          absl::Span<const FlatRange> b) {
  std::vector<FlatRange> out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t lo = std::max(a[i].begin, b[j].begin);
    const int64_t hi = std::min(a[i].end, b[j].end);
    if (lo < hi) out.push_back({lo, hi});
    if (a[i].end < b[j].end) {
      ++i;
    } else {
      ++j;
    }
  }
  return out;
}

std::vector<FlatRange> ComplementRangeSet(absl::Span<const FlatRange> ranges,
                                          int64_t begin, int64_t end) {
  std::vector<FlatRange> out;
  int64_t at = begin;
  for (const FlatRange& r : ranges) {
    if (r.end <= at) continue;
    if (r.begin >= end) break;
    if (r.begin > at) out.push_back({at, r.begin});
    at = std::max(at, r.end);
  }
  if (at < end) out.push_back({at, end});
  return out;
}

std::vector<FlatRange> ClipRangeSet(absl::Span<const FlatRange> ranges,
                                    int64_t begin, int64_t end) {
  std::vector<FlatRange> out;
  for (const FlatRange& r : ranges) {
    const int64_t lo = std::max(r.begin, begin);
    const int64_t hi = std::min(r.end, end);
    if (lo < hi) out.push_back({lo - begin, hi - begin});
  }
  return out;
}

std::vector<int64_t> ToRangePairs(absl::Span<const FlatRange> ranges) {
  std::vector<int64_t> pairs;
  pairs.reserve(ranges.size() * 2);
  for (const FlatRange& r : ranges) {
    pairs.push_back(r.begin);
    pairs.push_back(r.end);
  }
  return pairs;
}

absl::Status FromRangePairs(absl::Span<const int64_t> pairs, int64_t limit,
                            absl::string_view what,
                            std::vector<FlatRange>* out) {
  if (pairs.size() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", pairs.size(), " range bounds, not pairs of (begin, end)"));
  }
  std::vector<FlatRange> ranges;
  ranges.reserve(pairs.size() / 2);
  for (size_t i = 0; i < pairs.size(); i += 2) {
    ranges.push_back({pairs[i], pairs[i + 1]});
  }
  if (absl::Status s = CheckRangeSet(ranges, limit, what); !s.ok()) return s;
  *out = std::move(ranges);
  return absl::OkStatus();
}

}  // namespace ferry

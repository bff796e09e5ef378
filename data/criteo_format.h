// The Criteo display-ads TSV format, one example per line:
//   label \t I1 ... I13 \t C1 ... C26
// label is 0 or 1; I1..I13 are integer counts (possibly negative, possibly
// empty); C1..C26 are categorical values as 8 hex digits (possibly empty).
// A trailing '\r' is accepted. The parse is pure and allocation-free.
//
// Ids: a present categorical value is its 32-bit hex value; an empty one is
// kCriteoMissingId, which no 8-hex-digit value can equal. An empty integer
// reads as 0 with its bit in `dense_missing` set.
#ifndef FERRY_DATA_CRITEO_FORMAT_H_
#define FERRY_DATA_CRITEO_FORMAT_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ferry {

inline constexpr int kCriteoDense = 13;
inline constexpr int kCriteoCategorical = 26;
inline constexpr int kCriteoColumns = 1 + kCriteoDense + kCriteoCategorical;
inline constexpr uint64_t kCriteoMissingId = uint64_t{1} << 32;

struct CriteoExample {
  int label = 0;
  std::array<int64_t, kCriteoDense> dense{};
  uint32_t dense_missing = 0;  // bit j: I(j+1) was empty
  std::array<uint64_t, kCriteoCategorical> ids{};
};

// Parses one line (without its '\n'). INVALID_ARGUMENT saying what is wrong
// and in which column (1-based, as in the file: 1 is the label): a column
// count other than 40, a label other than 0/1, a non-integer or out-of-range
// integer, a categorical value that is not exactly 8 hex digits. `out` is
// unspecified on error.
absl::Status ParseCriteoLine(absl::string_view line, CriteoExample& out);

// The line of `example` (no '\n'), as ParseCriteoLine reads it back: ids
// print as 8 lowercase hex digits, kCriteoMissingId and missing integers as
// empty columns. REQUIRES: every id < 2^32 or == kCriteoMissingId.
std::string FormatCriteoLine(const CriteoExample& example);
// The same, appended to `out` (no allocation once `out` has room).
void AppendCriteoLine(const CriteoExample& example, std::string& out);

}  // namespace ferry

#endif  // FERRY_DATA_CRITEO_FORMAT_H_

#include "data/criteo_format.h"

#include <charconv>

#include "absl/strings/str_format.h"

namespace ferry {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A printable, bounded excerpt of a bad value for an error message.
std::string Excerpt(absl::string_view value) {
  constexpr size_t kMax = 24;
  std::string out;
  for (char c : value.substr(0, kMax)) {
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (value.size() > kMax) out += "...";
  return out;
}

}  // namespace

absl::Status ParseCriteoLine(absl::string_view line, CriteoExample& out) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  int column = 0;  // 0-based index of the column being read
  size_t start = 0;
  out.dense_missing = 0;
  while (true) {
    const size_t tab = line.find('\t', start);
    const absl::string_view value = line.substr(
        start,
        tab == absl::string_view::npos ? absl::string_view::npos : tab - start);
    if (column >= kCriteoColumns) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "more than %d tab-separated columns", kCriteoColumns));
    }
    if (column == 0) {
      if (value != "0" && value != "1") {
        return absl::InvalidArgumentError(absl::StrFormat(
            "column 1 (label): expected 0 or 1, found '%s'", Excerpt(value)));
      }
      out.label = value[0] - '0';
    } else if (column <= kCriteoDense) {
      const int j = column - 1;
      if (value.empty()) {
        out.dense[j] = 0;
        out.dense_missing |= 1u << j;
      } else {
        int64_t v = 0;
        const char* end = value.data() + value.size();
        const auto [ptr, ec] = std::from_chars(value.data(), end, v);
        if (ec != std::errc() || ptr != end) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "column %d (I%d): expected an integer, found '%s'", column + 1,
              j + 1, Excerpt(value)));
        }
        out.dense[j] = v;
      }
    } else {
      const int j = column - 1 - kCriteoDense;
      if (value.empty()) {
        out.ids[j] = kCriteoMissingId;
      } else {
        uint64_t id = 0;
        bool ok = value.size() == 8;
        for (size_t k = 0; ok && k < value.size(); ++k) {
          const int h = HexValue(value[k]);
          ok = h >= 0;
          id = (id << 4) | static_cast<uint64_t>(h);
        }
        if (!ok) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "column %d (C%d): expected 8 hex digits, found '%s'", column + 1,
              j + 1, Excerpt(value)));
        }
        out.ids[j] = id;
      }
    }
    ++column;
    if (tab == absl::string_view::npos) break;
    start = tab + 1;
  }
  if (column != kCriteoColumns) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d tab-separated columns, expected %d (label, I1-I13, C1-C26)", column,
        kCriteoColumns));
  }
  return absl::OkStatus();
}

void AppendCriteoLine(const CriteoExample& example, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += static_cast<char>('0' + example.label);
  char digits[24];
  for (int j = 0; j < kCriteoDense; ++j) {
    out += '\t';
    if (example.dense_missing & (1u << j)) continue;
    const auto [end, ec] =
        std::to_chars(digits, digits + sizeof(digits), example.dense[j]);
    out.append(digits, end);
  }
  for (int j = 0; j < kCriteoCategorical; ++j) {
    out += '\t';
    const uint64_t id = example.ids[j];
    if (id == kCriteoMissingId) continue;
    for (int shift = 28; shift >= 0; shift -= 4)
      out += kHex[(id >> shift) & 15];
  }
}

std::string FormatCriteoLine(const CriteoExample& example) {
  std::string out;
  AppendCriteoLine(example, out);
  return out;
}

}  // namespace ferry

#include "ps/sparse_rows_wire.h"

#include <bit>
#include <cstring>

#include "absl/strings/str_format.h"

namespace ferry {

static_assert(std::endian::native == std::endian::little,
              "rows travel as little-endian values and are copied as is");

void ToSparseRowsPart(int32_t table, absl::Span<const uint64_t> ids,
                      absl::Span<const float> values,
                      v1::SparseRowsPart* part) {
  part->set_table(table);
  part->clear_ids();
  part->clear_values();
  // Empty spans may hold null pointers, which memcpy must not see.
  if (!ids.empty()) {
    part->set_ids(reinterpret_cast<const char*>(ids.data()),
                  ids.size() * sizeof(uint64_t));
  }
  if (!values.empty()) {
    part->set_values(reinterpret_cast<const char*>(values.data()),
                     values.size() * sizeof(float));
  }
}

absl::StatusOr<SparseRows> FromSparseRowsPart(const v1::SparseRowsPart& part) {
  const std::string& ids = part.ids();
  const std::string& values = part.values();
  if (ids.size() % sizeof(uint64_t) != 0 ||
      values.size() % sizeof(float) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "embedding table %d: %d bytes of ids and %d bytes of values are not "
        "whole uint64 ids and fp32 values",
        part.table(), ids.size(), values.size()));
  }
  const int64_t count = static_cast<int64_t>(ids.size() / sizeof(uint64_t));
  if (count > kMaxIdsPerPart) {
    return absl::InvalidArgumentError(
        absl::StrFormat("embedding table %d: %d ids in one message, more "
                        "than %d",
                        part.table(), count, kMaxIdsPerPart));
  }
  SparseRows rows;
  rows.table = part.table();
  rows.ids.resize(static_cast<size_t>(count));
  if (!ids.empty()) std::memcpy(rows.ids.data(), ids.data(), ids.size());
  rows.grads.resize(values.size() / sizeof(float));
  if (!values.empty()) {
    std::memcpy(rows.grads.data(), values.data(), values.size());
  }
  return rows;
}

}  // namespace ferry

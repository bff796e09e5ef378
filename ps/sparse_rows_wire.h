// ferry.v1.SparseRowsPart <-> embedding rows (ps/sparse_store.h): ids as
// little-endian uint64, values as little-endian fp32 (docs/protocol.md).
//
// Thread safety: pure functions.
#ifndef FERRY_PS_SPARSE_ROWS_WIRE_H_
#define FERRY_PS_SPARSE_ROWS_WIRE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ferry/v1/ps.pb.h"
#include "ps/sparse_store.h"

namespace ferry {

// The most ids one part may carry (a peer cannot make a shard allocate
// more per message).
inline constexpr int64_t kMaxIdsPerPart = int64_t{1} << 22;

// Writes `table`, `ids` and `values` (may be empty: a row pull's request)
// into `part`.
void ToSparseRowsPart(int32_t table, absl::Span<const uint64_t> ids,
                      absl::Span<const float> values, v1::SparseRowsPart* part);

// Decodes a part. INVALID_ARGUMENT naming the table when the ids' bytes are
// not a multiple of 8, the values' bytes not a multiple of 4, or there are
// more than kMaxIdsPerPart ids. Sizes against the table's dim are the
// receiver's to check (SparseStore::CheckRows).
absl::StatusOr<SparseRows> FromSparseRowsPart(const v1::SparseRowsPart& part);

}  // namespace ferry

#endif  // FERRY_PS_SPARSE_ROWS_WIRE_H_

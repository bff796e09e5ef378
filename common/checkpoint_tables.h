// The embedding-table section of a shard checkpoint (format version 2,
// common/checkpoint_io.h), after the dense buffers and before the CRC. All
// integers little-endian:
//   u32 num_tables                   <= kMaxCheckpointTables
//   per table:
//     i32 table, u32 row_floats      a row's values + optimizer state
//     u64 rows
//     u64 ids[rows], i64 last_seen[rows], f32 values[rows * row_floats]
//     u64 pending                    admission counters
//     u64 ids[pending], i32 counts[pending], i64 last_seen[pending]
//
// Thread safety: pure functions.
#ifndef FERRY_COMMON_CHECKPOINT_TABLES_H_
#define FERRY_COMMON_CHECKPOINT_TABLES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ferry {

inline constexpr uint32_t kMaxCheckpointTables = 4096;
// A row's floats: dim <= 4096 values plus FTRL's 2 x dim state.
inline constexpr uint32_t kMaxCheckpointRowFloats = 3 * 4096;

// One table's part on one shard: its rows and admission counters.
struct TableCheckpoint {
  int32_t table = 0;
  uint32_t row_floats = 0;
  std::vector<uint64_t> ids;
  std::vector<int64_t> last_seen;  // per row
  std::vector<float> values;       // rows x row_floats
  std::vector<uint64_t> pending_ids;
  std::vector<int32_t> pending_counts;
  std::vector<int64_t> pending_last_seen;
};

// Appends the section. REQUIRES: every table's vectors sized consistently
// (ValidateTables).
void EncodeTables(const std::vector<TableCheckpoint>& tables, std::string& out);

// INVALID_ARGUMENT naming the table when its vectors do not match (ids vs
// last_seen vs values / row_floats, pending vectors), row_floats is 0 or
// above kMaxCheckpointRowFloats, or there are too many tables.
absl::Status ValidateTables(const std::vector<TableCheckpoint>& tables);

// Parses a whole section. DATA_LOSS when it ends early, has bytes left
// over, or claims counts that do not fit in it (nothing is allocated
// beyond what the bytes hold).
absl::StatusOr<std::vector<TableCheckpoint>> DecodeTables(
    absl::string_view section);

}  // namespace ferry

#endif  // FERRY_COMMON_CHECKPOINT_TABLES_H_

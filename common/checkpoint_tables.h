// The embedding-table section of a shard checkpoint (format versions 2 and
// 3, common/checkpoint_io.h), after the dense buffers and before the CRC.
// All integers little-endian:
//   u32 num_tables                   <= kMaxCheckpointTables
//   per table:
//     i32 table, u32 row_floats      a row's values + optimizer state
//     u64 rows
//     u64 ids[rows], i64 last_seen[rows], f32 values[rows * row_floats]
//     u64 pending                    admission counters
//     u64 ids[pending], i32 counts[pending], i64 last_seen[pending]
//     (format version 3 only) the table's event counters:
//     i64 rows_created, ids_admitted, updates_dropped, evicted_ttl,
//         evicted_memory
//
// The section is written from TablePartSources: a shard's live tables read
// in place (no copy of the rows; ps/sparse_store.h), or TableCheckpoints in
// memory. Both give the same bytes for the same content.
//
// Thread safety: pure functions; a source is read by one thread at a time.
#ifndef FERRY_COMMON_CHECKPOINT_TABLES_H_
#define FERRY_COMMON_CHECKPOINT_TABLES_H_

#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/byte_sink.h"

namespace ferry {

inline constexpr uint32_t kMaxCheckpointTables = 4096;
// A row's floats: dim <= 4096 values plus FTRL's 2 x dim state.
inline constexpr uint32_t kMaxCheckpointRowFloats = 3 * 4096;

// What happened to a table's rows since it was created (ps/sparse_table.h
// SparseTableStats' cumulative counters); format version 3 keeps them so
// that a restored shard counts on from them.
struct TableCounters {
  int64_t rows_created = 0;
  int64_t ids_admitted = 0;
  int64_t updates_dropped = 0;
  int64_t evicted_ttl = 0;
  int64_t evicted_memory = 0;

  bool operator==(const TableCounters&) const = default;
};

// One table's part on one shard, in memory: its rows and admission
// counters.
struct TableCheckpoint {
  int32_t table = 0;
  uint32_t row_floats = 0;
  std::vector<uint64_t> ids;
  std::vector<int64_t> last_seen;  // per row
  std::vector<float> values;       // rows x row_floats
  std::vector<uint64_t> pending_ids;
  std::vector<int32_t> pending_counts;
  std::vector<int64_t> pending_last_seen;
  // Set in format version 3, for every table of a checkpoint; absent in
  // version 2 (written before the counters were kept).
  std::optional<TableCounters> counters;
};

// `n` values of T packed at any alignment in the host's byte order (the
// format's little-endian: checkpoints are read on little-endian hosts
// only), read in place: a column of a checkpoint file (its offsets are not
// aligned to T), or of vectors in memory. Values are read by copy, never
// through a T pointer.
template <typename T>
class PackedColumn {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  PackedColumn() = default;
  PackedColumn(const char* data, size_t n) : data_(data), n_(n) {}
  static PackedColumn Of(absl::Span<const T> values) {
    return PackedColumn(reinterpret_cast<const char*>(values.data()),
                        values.size());
  }
  size_t size() const { return n_; }
  T operator[](size_t i) const {
    T value;
    std::memcpy(&value, data_ + i * sizeof(T), sizeof(T));
    return value;
  }
  // Copies values [first, first + n) to `out`.
  void CopyTo(size_t first, size_t n, T* out) const {
    if (n > 0) std::memcpy(out, data_ + first * sizeof(T), n * sizeof(T));
  }
  std::vector<T> ToVector() const {
    std::vector<T> values(n_);
    CopyTo(0, n_, values.data());
    return values;
  }
  // The bytes of values [first, first + n).
  absl::string_view bytes(size_t first, size_t n) const {
    return absl::string_view(data_ + first * sizeof(T), n * sizeof(T));
  }

 private:
  const char* data_ = nullptr;
  size_t n_ = 0;
};

// Told of parts of a file's bytes as a reader is done with them
// (MappedFile::Release).
using BytesDone = std::function<void(absl::string_view)>;

// One table's part read in place (DecodeTableViews): the same fields as
// TableCheckpoint, valid while the bytes it was read from are.
struct TableCheckpointView {
  int32_t table = 0;
  uint32_t row_floats = 0;
  PackedColumn<uint64_t> ids;
  PackedColumn<int64_t> last_seen;
  PackedColumn<float> values;  // ids.size() x row_floats
  PackedColumn<uint64_t> pending_ids;
  PackedColumn<int32_t> pending_counts;
  PackedColumn<int64_t> pending_last_seen;
  std::optional<TableCounters> counters;

  // A view of `part`'s vectors (which must outlive it).
  static TableCheckpointView Of(const TableCheckpoint& part);
  TableCheckpoint Copy() const;
};

// Views of in-memory parts (which must outlive them).
std::vector<TableCheckpointView> ViewsOf(
    const std::vector<TableCheckpoint>& parts);

// Consecutive rows of a table read in place: ids.size() rows.
struct TableRowRun {
  absl::Span<const uint64_t> ids;
  absl::Span<const int64_t> last_seen;  // ids.size()
  absl::Span<const float> values;       // ids.size() x row_floats
};

// One table's part as a checkpoint writer reads it: the header first, then
// every row column by column (each pass over ForEachRun), then the pending
// counters the same way. The source must not change while it is written
// (its owner holds its lock): every ForEachRun call must give the same
// runs, together rows() rows, and every ForEachPending call the same
// pending() counters in the same order; the writer fails (INTERNAL)
// otherwise.
class TablePartSource {
 public:
  virtual ~TablePartSource() = default;
  virtual int32_t table() const = 0;
  virtual uint32_t row_floats() const = 0;
  virtual uint64_t rows() const = 0;
  virtual uint64_t pending() const = 0;
  virtual std::optional<TableCounters> counters() const = 0;
  virtual void ForEachRun(
      const std::function<void(const TableRowRun&)>& fn) const = 0;
  virtual void ForEachPending(
      const std::function<void(uint64_t id, int32_t count, int64_t last_seen)>&
          fn) const = 0;
};

// A TableCheckpoint as a source (not owned; it must outlive the source).
// REQUIRES: it passes ValidateTables.
class TableCheckpointSource final : public TablePartSource {
 public:
  explicit TableCheckpointSource(const TableCheckpoint* part) : part_(part) {}
  int32_t table() const override { return part_->table; }
  uint32_t row_floats() const override { return part_->row_floats; }
  uint64_t rows() const override { return part_->ids.size(); }
  uint64_t pending() const override { return part_->pending_ids.size(); }
  std::optional<TableCounters> counters() const override {
    return part_->counters;
  }
  void ForEachRun(
      const std::function<void(const TableRowRun&)>& fn) const override;
  void ForEachPending(
      const std::function<void(uint64_t, int32_t, int64_t)>& fn) const override;

 private:
  const TableCheckpoint* const part_;
};

// Sources over in-memory tables (which must outlive this object), and the
// pointers to them that writers take.
class TableCheckpointSources {
 public:
  explicit TableCheckpointSources(const std::vector<TableCheckpoint>& tables);
  TableCheckpointSources(const TableCheckpointSources&) = delete;
  TableCheckpointSources& operator=(const TableCheckpointSources&) = delete;
  absl::Span<const TablePartSource* const> pointers() const {
    return pointers_;
  }

 private:
  std::vector<TableCheckpointSource> sources_;
  std::vector<const TablePartSource*> pointers_;
};

// INVALID_ARGUMENT naming the table when its vectors do not match (ids vs
// last_seen vs values / row_floats, pending vectors), row_floats is 0 or
// above kMaxCheckpointRowFloats, there are too many tables, or some tables
// have counters and others not.
absl::Status ValidateTables(const std::vector<TableCheckpoint>& tables);
// The same checks of sources' headers (what can be checked before reading
// their rows).
absl::Status ValidateTableSources(
    absl::Span<const TablePartSource* const> tables);

// Writes the section to `sink`, with the counters (format version 3) when
// `with_counters`, else without (version 2). REQUIRES: the sources pass
// ValidateTableSources and, with_counters, all have counters. Errors: the
// sink's; INTERNAL when a source gives other rows or counters than its
// header claims (what was written is then not a valid section).
absl::Status WriteTables(absl::Span<const TablePartSource* const> tables,
                         bool with_counters, ByteSink& sink);

// Appends the section of in-memory tables (version 3 when they have
// counters). REQUIRES: ValidateTables(tables) is OK.
void EncodeTables(const std::vector<TableCheckpoint>& tables, std::string& out);

// Parses a whole section (with the counters when `with_counters`).
// DATA_LOSS when it ends early, has bytes left over, or claims counts that
// do not fit in it (nothing is allocated beyond what the bytes hold).
absl::StatusOr<std::vector<TableCheckpoint>> DecodeTables(
    absl::string_view section, bool with_counters = false);
// The same without copying the rows: views into `section`, which must
// outlive them. Reads only the tables' headers and counts.
absl::StatusOr<std::vector<TableCheckpointView>> DecodeTableViews(
    absl::string_view section, bool with_counters = false);

}  // namespace ferry

#endif  // FERRY_COMMON_CHECKPOINT_TABLES_H_

// SparseTable: one hash-keyed embedding table (or the part of it one PS shard
// holds), without gRPC types. Rows are `dim` floats keyed by 64-bit ids,
// created when first updated, with a row-wise optimizer
// (compute/row_optimizer_math.h) and the admission and eviction rules of
// production CTR systems:
//
//  - Reads: a stored row reads as its values; an id without a row reads as
//    its initial values (InitRow: a pure function of seed, table and id) once
//    admitted, as zeros before. Reads change nothing.
//  - Admission: with admit_count N > 1 an id is admitted once N updates have
//    named it; until then each update only counts it (its gradient is
//    dropped: the forward pass read zeros) and nothing but the counter is
//    stored. With N <= 1 every id is admitted.
//  - Updates: Apply() takes one step's unique ids and their mean gradients;
//    an admitted id's row is created at its initial values if absent, then
//    updated, and stamped with the step (its "last seen").
//  - Eviction: EvictUnseenSince(step) drops rows and counters last seen
//    before `step` (TTL); EvictOldest(n) drops the n least recently seen rows
//    (a memory limit; a store of several tables evicts across them with
//    LastSeenHistogram and EvictSeenAt). An evicted id starts over (counted
//    again, then created at its initial values).
//
// Memory: a row costs RowBytes() (values + optimizer state) + 16 bytes (id,
// last-seen step) in fixed-size blocks that are never reallocated (no
// copy-on-growth peak), plus its slot in an absl::flat_hash_set of 4-byte
// row numbers hashed by the ids stored in the blocks (5 bytes / load
// factor). Rows stay dense: a removed row's place is filled with the last
// row.
//
// Errors: nothing changes on any error.
// Thread safety: not thread-safe; the owner (a shard) serializes calls.
#ifndef FERRY_PS_SPARSE_TABLE_H_
#define FERRY_PS_SPARSE_TABLE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/checkpoint_tables.h"
#include "compute/row_optimizer_math.h"
#include "model/embedding_options.h"

namespace ferry {

// Limits on what a table may be configured with.
inline constexpr int32_t kMaxEmbeddingDim = 4096;
inline constexpr int32_t kMaxEmbeddingTables = 4096;

struct SparseTableConfig {
  int32_t table = 0;  // the table's id in its job
  int32_t dim = 16;
  RowOptimizerParams optimizer;
  uint64_t seed = 0;
  float init_scale = 0.0f;  // uniform in [-s, s); 0 = 1 / sqrt(dim)
  int32_t admit_count = 1;
};

// What one Apply() changed in a table, enough to put it back (ring mode's
// rollback of a step the coordinator aborted after a member applied it):
// each touched id's state before the update and the table's counters.
struct TableUndo {
  enum class Was : uint8_t {
    kAbsent,   // neither a row nor a pending counter
    kPending,  // a pending counter (count, last_seen)
    kRow,      // a stored row (last_seen and its floats in `rows`)
  };
  struct Entry {
    uint64_t id = 0;
    Was was = Was::kAbsent;
    int32_t count = 0;
    int64_t last_seen = 0;
  };
  std::vector<Entry> entries;
  std::vector<float> rows;  // RowFloats() floats per kRow entry, in order
  TableCounters counters;
};

struct SparseTableStats {
  int64_t rows = 0;             // stored rows
  int64_t pending_ids = 0;      // ids counted, not yet admitted
  int64_t rows_created = 0;     // since creation
  int64_t ids_admitted = 0;     // ids that reached admit_count
  int64_t updates_dropped = 0;  // row updates of ids not yet admitted
  int64_t evicted_ttl = 0;      // rows evicted by EvictUnseenSince
  int64_t evicted_memory = 0;   // rows evicted by EvictOldest
  int64_t row_bytes = 0;        // rows * RowBytes()
  int64_t overhead_bytes = 0;   // ids, steps, index, counters, free blocks
  int64_t index_bytes = 0;      // of which the index: its slots x (4 + 1)
};

class SparseTable {
 public:
  // Rows per storage block.
  static constexpr int32_t kBlockRows = 1 << 14;

  // INVALID_ARGUMENT for a table id outside [0, kMaxEmbeddingTables), dim
  // outside [1, kMaxEmbeddingDim], a negative or non-finite init_scale, or an
  // invalid optimizer.
  static absl::StatusOr<std::unique_ptr<SparseTable>> Create(
      const SparseTableConfig& config);

  SparseTable(const SparseTable&) = delete;
  SparseTable& operator=(const SparseTable&) = delete;

  const SparseTableConfig& config() const { return config_; }
  int32_t dim() const { return config_.dim; }
  // Floats of one stored row: dim values + optimizer state.
  int32_t RowFloats() const { return stride_; }
  int64_t RowBytes() const { return int64_t{stride_} * 4; }

  // Values of `ids` (any ids, repeats allowed) into `out` [ids.size() x dim].
  // INVALID_ARGUMENT when out.size() != ids.size() * dim.
  absl::Status Read(absl::Span<const uint64_t> ids,
                    absl::Span<float> out) const;

  // One update at `step`: `grads` [ids.size() x dim] are the mean gradients
  // of `ids`, which must be unique. INVALID_ARGUMENT (naming the id) for a
  // repeated id, a size mismatch or a non-finite gradient; nothing changes.
  // With `undo`, it is overwritten with what the update changes (only when
  // it returns OK).
  absl::Status Apply(absl::Span<const uint64_t> ids,
                     absl::Span<const float> grads, int64_t step,
                     TableUndo* undo = nullptr);
  // Puts back what the Apply that wrote `undo` changed. REQUIRES: every
  // Apply after that one was undone first (newest first) and nothing else
  // changed the table since (no eviction, restore or insert).
  void Undo(const TableUndo& undo);

  // Drops rows and pending counters last seen before `step`; returns the
  // number of rows dropped.
  int64_t EvictUnseenSince(int64_t step);
  // Drops the `n` least recently seen rows (among rows seen at the same
  // step, any); returns the number dropped (at most rows()).
  int64_t EvictOldest(int64_t n);
  // Rows by last-seen step.
  absl::flat_hash_map<int64_t, int64_t> LastSeenHistogram() const;
  // Memory eviction of a store: drops every row last seen before `step`, or
  // up to `n` rows last seen at exactly `step`; returns how many (counted in
  // evicted_memory). Admission counters stay.
  int64_t EvictSeenBefore(int64_t step);
  int64_t EvictSeenAt(int64_t step, int64_t n);

  int64_t rows() const { return rows_; }
  // Ids counted, not yet admitted (their counters).
  int64_t pending_ids() const { return static_cast<int64_t>(pending_.size()); }
  bool HasRow(uint64_t id) const { return index_.contains(Key{id}); }
  SparseTableStats Stats() const;

  // Checkpoints: every stored row in an unspecified order, with its last-seen
  // step and its RowFloats() floats; then every pending counter.
  // ForEachBlock gives the rows in place, a storage block (up to kBlockRows
  // consecutive rows) per call, in the order ForEachRow gives them; both
  // iterate in the same order on every call while the table is unchanged.
  void ForEachBlock(const std::function<void(const TableRowRun&)>& fn) const;
  void ForEachRow(
      const std::function<void(uint64_t id, int64_t last_seen,
                               absl::Span<const float> row)>& fn) const;
  void ForEachPending(const std::function<void(uint64_t id, int32_t count,
                                               int64_t last_seen)>& fn) const;
  // Restore: adds a row (INVALID_ARGUMENT for a row already stored, a size
  // other than RowFloats() or non-finite values) or a pending counter
  // (INVALID_ARGUMENT for a table with admit_count <= 1, a count outside
  // [1, admit_count], or an id with a row).
  absl::Status InsertRow(uint64_t id, int64_t last_seen,
                         absl::Span<const float> row);
  absl::Status InsertPending(uint64_t id, int32_t count, int64_t last_seen);
  // The cumulative event counters (Stats()' rows_created .. evicted_memory),
  // and their replacement by a checkpoint's (a restore counts on from them).
  TableCounters counters() const;
  void set_counters(const TableCounters& counters);

 private:
  // The index stores row numbers; it hashes and compares them by the ids
  // the table stores for them, and looks up by id (heterogeneous lookup).
  struct Key {
    uint64_t id;
  };
  struct IndexHash {
    using is_transparent = void;
    const SparseTable* table;
    size_t operator()(uint32_t row) const;
    size_t operator()(Key key) const;
  };
  struct IndexEq {
    using is_transparent = void;
    const SparseTable* table;
    bool operator()(uint32_t a, uint32_t b) const { return a == b; }
    bool operator()(uint32_t row, Key key) const;
    bool operator()(Key key, uint32_t row) const { return (*this)(row, key); }
  };
  struct Pending {
    int32_t count = 0;
    int64_t last_seen = 0;
  };

  explicit SparseTable(const SparseTableConfig& config);

  // Rows are stored in blocks of kBlockRows: values + state, id, last seen.
  struct Block {
    std::unique_ptr<float[]> values;
    std::unique_ptr<uint64_t[]> ids;
    std::unique_ptr<int64_t[]> last_seen;
  };
  float* RowData(uint32_t row) {
    return blocks_[row / kBlockRows].values.get() +
           int64_t{row % kBlockRows} * stride_;
  }
  const float* RowData(uint32_t row) const {
    return blocks_[row / kBlockRows].values.get() +
           int64_t{row % kBlockRows} * stride_;
  }
  uint64_t& IdOf(uint32_t row) {
    return blocks_[row / kBlockRows].ids[row % kBlockRows];
  }
  uint64_t IdOf(uint32_t row) const {
    return blocks_[row / kBlockRows].ids[row % kBlockRows];
  }
  int64_t& LastSeenOf(uint32_t row) {
    return blocks_[row / kBlockRows].last_seen[row % kBlockRows];
  }
  int64_t LastSeenOf(uint32_t row) const {
    return blocks_[row / kBlockRows].last_seen[row % kBlockRows];
  }
  // Appends a row for `id` (uninitialized floats) and returns its number.
  uint32_t AddRow(uint64_t id, int64_t last_seen);
  // Removes row `row` by moving the last row into its place; frees blocks
  // left empty but one.
  void RemoveRow(uint32_t row);
  // Removes the rows for which `evict(row)` holds, up to `n`; returns how
  // many.
  int64_t RemoveRowsIf(const std::function<bool(uint32_t)>& evict, int64_t n);
  // Overwrites `undo` with the state of `ids` and the counters.
  void RecordUndo(absl::Span<const uint64_t> ids, TableUndo& undo) const;
  // Whether an id without a row reads as its initial values.
  bool Admitted(uint64_t id) const;

  const SparseTableConfig config_;
  const int32_t stride_;
  std::vector<Block> blocks_;
  int64_t rows_ = 0;
  absl::flat_hash_set<uint32_t, IndexHash, IndexEq> index_;
  absl::flat_hash_map<uint64_t, Pending> pending_;
  SparseTableStats counts_;  // the cumulative counters
};

}  // namespace ferry

#endif  // FERRY_PS_SPARSE_TABLE_H_

// SparseStore: the embedding rows one PS shard holds, over every table of a
// job, without gRPC types. Row (table, id) lives on shard
// ShardOfRow(table, id, num_shards) (common/sharding.h); each table's part is
// a SparseTable (ps/sparse_table.h: admission, row-wise optimizer, reads of
// unseen rows as their initial values).
//
// Updates come as contributions: one worker's row gradients of one step,
// SUMS over its samples, per table (SparseRows). ApplyStep() sums the
// contributions in the order given (per id), divides by the step's total
// samples (the mean gradient, as for dense parameters) and applies one
// update per touched row. Then it enforces the limits:
//  - TTL: rows and admission counters unseen for more than ttl_steps steps
//    are dropped; the tables are scanned every max(1, ttl_steps / 4) steps,
//    so a row lives between ttl_steps and 1.25 x ttl_steps unseen steps;
//  - memory: when the rows' bytes (values, optimizer state, ids, steps and
//    index) exceed max_bytes, the least recently updated rows of all tables
//    are dropped until they fit in 90 % of it (a step's own rows last).
// Both are counted in Stats().
//
// CheckRows() and config() read only what Create fixed (the dims, the
// placement), so a shard may call them without its lock; every other
// method needs the caller's serialization.
//
// Errors: CheckRows() refuses a contribution that names an unknown table,
// an id twice in one table, an id placed on another shard, a gradient of the
// wrong size or a non-finite one (INVALID_ARGUMENT naming the table and id);
// ApplyStep() checks every contribution first and changes nothing on error.
// Thread safety: not thread-safe (but for CheckRows and config, above); the
// shard serializes calls.
#ifndef FERRY_PS_SPARSE_STORE_H_
#define FERRY_PS_SPARSE_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/checkpoint_tables.h"
#include "model/embedding_bag.h"
#include "model/embedding_options.h"
#include "model/embedding_row_source.h"
#include "ps/sparse_table.h"

namespace ferry {

struct SparseStoreConfig {
  int32_t shard_id = 0;
  int32_t num_shards = 1;
  std::vector<int32_t> dims;  // table t's embedding dim, t = 0 .. T-1
  RowOptimizerParams optimizer;
  uint64_t seed = 0;
  float init_scale = 0.0f;  // 0: 1 / sqrt(dim)
  int32_t admit_count = 1;
  int64_t ttl_steps = 0;  // 0: rows never expire
  int64_t max_bytes = 0;  // 0: no limit
};

// The store of shard `shard_id` of `num_shards` for tables of `dims` under
// the job's embedding options (optimizer, admission, TTL, memory limit in
// MiB over all of the shard's tables) and seed.
SparseStoreConfig MakeSparseStoreConfig(const EmbeddingOptions& options,
                                        std::vector<int32_t> dims,
                                        uint64_t seed, int32_t shard_id = 0,
                                        int32_t num_shards = 1);

struct SparseStoreStats {
  SparseTableStats total;  // summed over the tables
  std::vector<SparseTableStats> tables;
  // What max_bytes limits: rows x (RowBytes() + 21), the 21 bytes being a
  // row's id, last-seen step and index slot at the index's usual load.
  int64_t bytes = 0;
};

// What one ApplyStep changed: the undo of every table it updated.
struct SparseStepUndo {
  std::vector<int32_t> tables;   // the updated tables, in order
  std::vector<TableUndo> undos;  // one per entry of `tables`
};

// Which rows of a checkpoint's parts a restore takes: all of them (each
// must be placed on this shard), or only those placed on this shard.
enum class TableScope { kAll, kPlacedHere };
struct TableRestoreOptions {
  TableScope scope = TableScope::kAll;
  // Subtracted from every row's and pending counter's last-seen step (a
  // model's tables restored into a job that counts its steps from 0).
  int64_t last_seen_shift = 0;
};

class SparseStore {
 public:
  // INVALID_ARGUMENT for shard_id outside [0, num_shards), no tables, more
  // than kMaxEmbeddingTables, a table's config refused by SparseTable, or a
  // negative ttl_steps / max_bytes.
  static absl::StatusOr<std::unique_ptr<SparseStore>> Create(
      const SparseStoreConfig& config);

  const SparseStoreConfig& config() const { return config_; }
  int32_t num_tables() const { return static_cast<int32_t>(tables_.size()); }
  const SparseTable& table(int32_t t) const { return *tables_[t]; }
  SparseTable& mutable_table(int32_t t) { return *tables_[t]; }

  // Checks one contribution (see the errors above).
  absl::Status CheckRows(absl::Span<const SparseRows> rows) const;

  // Values of `ids` of table `table` into `out` [ids.size() x dim].
  // INVALID_ARGUMENT for an unknown table, an id placed on another shard or
  // a wrong output size.
  absl::Status Read(int32_t table, absl::Span<const uint64_t> ids,
                    absl::Span<float> out) const;

  // Applies step `step` over `contributions` (each as CheckRows wants it)
  // whose samples add up to `total_samples` (>= 1), then the TTL and memory
  // limits.
  // With `undo` (a store without TTL or memory limit: their evictions are
  // not recorded; FAILED_PRECONDITION otherwise), it is overwritten with
  // what the step changes.
  absl::Status ApplyStep(
      absl::Span<const std::vector<SparseRows>* const> contributions,
      int64_t total_samples, int64_t step, SparseStepUndo* undo = nullptr);
  // Puts back what the ApplyStep that wrote `undo` changed. REQUIRES: the
  // steps applied after it were undone first, newest first.
  void Undo(const SparseStepUndo& undo);
  // The same for contributions that already passed CheckRows (a shard
  // checks each push's rows as they arrive): skips that check. REQUIRES:
  // every contribution passed CheckRows and total_samples >= 1. A mean that
  // overflows to infinity is still refused (by the table, before it
  // changes).
  absl::Status ApplyCheckedStep(
      absl::Span<const std::vector<SparseRows>* const> contributions,
      int64_t total_samples, int64_t step, SparseStepUndo* undo = nullptr);

  SparseStoreStats Stats() const;

  // Checkpoints: every table's rows, admission counters and event counters
  // (one part per table, in table order). A copy of every row: for tests
  // and small stores; a shard's checkpoints read the rows in place
  // (CheckpointSources).
  std::vector<TableCheckpoint> Export() const;
  // The same parts read in place, without a copy: one source per table, in
  // table order, over the live tables (rows a storage block at a time).
  // The sources stay valid while the store lives and give the same bytes
  // as Export() only while it does not change: the caller keeps it
  // unchanged (a shard: under its lock) while a checkpoint writer reads
  // them.
  std::vector<std::unique_ptr<TablePartSource>> CheckpointSources() const;
  // Replaces every table with `tables` (as Export wrote them), their event
  // counters included (a part without them, from a format version 2 file,
  // leaves them at 0). Nothing changes on error: FAILED_PRECONDITION when
  // the parts are not exactly this store's tables with their row sizes (a
  // checkpoint of another job configuration); INVALID_ARGUMENT naming the
  // table and id for a row placed on another shard, a repeated id, a
  // non-finite value or a counter SparseTable::InsertPending refuses.
  absl::Status Restore(const std::vector<TableCheckpoint>& tables);
  // The same from parts read in place (a checkpoint file's mapping): the
  // rows are read once, front to back, and each column's bytes are handed
  // to `done` (when set) once read, a batch of rows at a time (the pending
  // counters' after them), so that a mapped file's pages leave memory
  // behind the reader. Ids are checked for their shard batch by batch, so
  // with several faults in a part the first in row order is reported. The
  // new tables are built aside and replace the old ones at the end: while
  // it runs the store holds both. TableScope::kPlacedHere takes only the
  // rows and pending counters of ids placed on this shard (a shard starting
  // from a whole model's tables) and leaves the event counters at 0. The
  // memory limit is enforced at the next step, not here.
  absl::Status Restore(absl::Span<const TableCheckpointView> tables,
                       const BytesDone& done,
                       const TableRestoreOptions& options = {});

 private:
  explicit SparseStore(const SparseStoreConfig& config) : config_(config) {}

  absl::Status CheckIdsPlaced(int32_t table,
                              absl::Span<const uint64_t> ids) const;
  void EnforceLimits(int64_t step);
  int64_t Bytes() const;

  const SparseStoreConfig config_;
  std::vector<std::unique_ptr<SparseTable>> tables_;
  int64_t last_ttl_scan_ = -1;
};

// A whole store as one blob: common/checkpoint_tables.h's section of its
// tables, with their counters (ring mode's tables between members and to
// the evaluation).
std::string EncodeSparseStore(const SparseStore& store);
// A store of `config` holding a blob's tables. DATA_LOSS for a malformed
// blob; Restore's errors (FAILED_PRECONDITION for tables of another
// configuration).
absl::StatusOr<std::unique_ptr<SparseStore>> DecodeSparseStore(
    absl::string_view blob, const SparseStoreConfig& config);

// The rows of a SparseStore as a CTR step's source (not owned; it must
// outlive this object). REQUIRES: the store holds every id it is asked for
// (num_shards 1, or ids already routed to their shard). Errors are Read's,
// prefixed with the table.
class SparseStoreRowSource : public EmbeddingRowSource {
 public:
  explicit SparseStoreRowSource(const SparseStore* store) : store_(store) {}

  absl::Status Read(absl::Span<const TableIds> tables,
                    std::vector<std::vector<float>>& out) override;

 private:
  const SparseStore* store_;
};

// Another source's rows read as id mod `rows` (ring mode's full tables, the
// hashing trick: worker/ring_tables.h). `source` is not owned and must
// outlive this object. REQUIRES: rows >= 1. Not thread-safe (a buffer of
// mapped ids is reused).
class ModuloRowSource final : public EmbeddingRowSource {
 public:
  ModuloRowSource(EmbeddingRowSource* source, int64_t rows)
      : source_(source), rows_(rows) {}

  absl::Status Read(absl::Span<const TableIds> tables,
                    std::vector<std::vector<float>>& out) override;

 private:
  EmbeddingRowSource* const source_;
  const int64_t rows_;
  std::vector<std::vector<uint64_t>> mapped_;
};

}  // namespace ferry

#endif  // FERRY_PS_SPARSE_STORE_H_

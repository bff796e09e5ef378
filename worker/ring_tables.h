// RingTables: ring mode's embedding tables. Every member of the ring holds
// the whole tables (a SparseStore of one shard) and keeps them bitwise
// identical to the other members':
//
//   step      each member declares its batch's row gradients (per table its
//             unique ids and their sums over its samples, SetStepRows);
//             ApplyStep all-gathers them over the ring (ring/ring_bytes.h:
//             each member receives the others' rows once, so a member sends
//             (N-1)/N of all the step's rows, like an all-reduce of them) and
//             every member applies the same update: the contributions summed
//             per id in rank order, divided by the step's samples, then the
//             row-wise optimizer (ps/sparse_store.h, the shards' code).
//   new ring  Broadcast: rank 0's tables replace every other member's (a
//             member that joined starts with them); skipped when every
//             member's digest already equals rank 0's (a ring re-formed
//             after a member left or a step was aborted).
//   rollback  the undo of each of the last kKeptSteps steps is kept, so a
//             member that applied a step the coordinator then aborted goes
//             back to the committed step (RollBackTo).
//
// Full tables (full_table_rows N > 0, PyTorch DDP's way, for comparison):
// every table is N rows, an id reads and updates row id mod N (the hashing
// trick), and a step all-reduces each table's whole gradient, N x dim
// floats per table, instead of all-gathering the touched rows; the rows
// whose summed gradient is not all zeros are then updated as above (DDP
// with a dense gradient: an untouched row's zero gradient changes nothing).
//
// Rows are never evicted in ring mode (a TTL or a memory limit would evict
// rows outside what an undo records): Create refuses both.
//
// Thread safety: not thread-safe; the ring exchange's training thread
// calls every method (the evaluation reads the tables through Encode(),
// called from that thread between steps).
#ifndef FERRY_WORKER_RING_TABLES_H_
#define FERRY_WORKER_RING_TABLES_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "model/embedding_bag.h"
#include "model/embedding_options.h"
#include "ps/sparse_store.h"
#include "ring/ring_transport.h"

namespace ferry {

class RingTables {
 public:
  // Steps whose undo is kept (RingExchange keeps as many dense copies).
  static constexpr int kKeptSteps = 3;

  // Tables of `dims` under the job's embedding options and seed; with
  // full_table_rows > 0, full tables of that many rows each (see above).
  // INVALID_ARGUMENT for a TTL or a memory limit (naming the flag; ring
  // mode keeps every row), a negative full_table_rows or full tables of
  // more than 2^31 floats, and for what SparseStore::Create refuses.
  static absl::StatusOr<std::unique_ptr<RingTables>> Create(
      std::vector<int32_t> dims, const EmbeddingOptions& options, uint64_t seed,
      int64_t full_table_rows = 0);

  // Where the open step reads its batch's rows (the member's own tables).
  EmbeddingRowSource* rows() {
    return full_table_rows_ > 0 ? static_cast<EmbeddingRowSource*>(&modulo_)
                                : &row_source_;
  }

  // The open step's row gradients (this member's contribution), declared
  // once per step before ApplyStep; a member without samples declares none.
  // INVALID_ARGUMENT for rows SparseStore::CheckRows refuses; nothing is
  // kept then.
  absl::Status SetStepRows(std::vector<SparseRows> rows);

  // Every member's declared rows to every member (op `op_id` of the ring's
  // transport, pieces of `piece_bytes`; full tables: the tables' whole
  // gradient all-reduced instead), then the step applied as step number
  // `steps_before` (the steps applied before it), its mean over
  // `step_samples` samples. The declared rows are consumed whatever the
  // outcome. Errors: the collective's (nothing changes); DATA_LOSS or
  // INVALID_ARGUMENT naming the rank for a malformed or refused
  // contribution (nothing changes).
  absl::Status ApplyStep(RingTransport& transport, int64_t op_id,
                         int64_t steps_before, int64_t step_samples,
                         int64_t piece_bytes, absl::Time deadline);

  // Drops the declared rows of an abandoned step.
  void ClearStepRows() { step_rows_.clear(); }

  // Puts the tables, now after `from_steps` steps, back to after `to_steps`
  // steps by undoing the newer steps, newest first (a no-op when to_steps >=
  // from_steps). FAILED_PRECONDITION (nothing changes) when an undo needed
  // is not kept.
  absl::Status RollBackTo(int64_t from_steps, int64_t to_steps);

  // Root's tables to every member: first every member's Digest() is
  // all-gathered (op `op_id`); unless all equal root's, root's tables then
  // replace every other member's (op `op_id` + 1; a receiver's undo is
  // dropped: a ring never rolls back past its start). Returns whether the
  // tables were sent. Errors: the collectives'; DATA_LOSS for a digest or
  // a blob that does not decode; FAILED_PRECONDITION for tables of another
  // configuration.
  absl::StatusOr<bool> Broadcast(RingTransport& transport, int64_t op_id,
                                 int root, int64_t piece_bytes,
                                 absl::Time deadline);

  // The tables as one blob (EncodeSparseStore): what Broadcast sends and
  // what the evaluation fetches.
  std::string Encode() const;

  // A digest of every row (id, values and optimizer state) and admission
  // counter, independent of the order the rows are stored in: equal on
  // every member after the same steps.
  uint64_t Digest() const;

  // The tables := a ring checkpoint's (their rows, optimizer state and
  // counters as SparseStore::Export gave them; common/ring_checkpoint.h),
  // the kept undos dropped (the ring does not roll back past a restored
  // checkpoint). SparseStore::Restore's errors; nothing changes then.
  absl::Status RestoreCheckpoint(const std::vector<TableCheckpoint>& tables);

  const SparseStore& store() const { return *store_; }
  // Before the first step: the tables a job started with --init-from
  // `init_from` (a model export or a ring DLRM's checkpoint directory,
  // ps/dlrm_init.h) begins with, every row (the member holds the whole
  // tables); `dense_elements` is the job's dense size. INVALID_ARGUMENT for
  // full tables (full_table_rows > 0: rows id mod N cannot take an
  // export's rows); RestoreDlrmInitTables's errors otherwise (the tables
  // unchanged).
  absl::Status LoadInitTables(const std::string& init_from,
                              int64_t dense_elements);
  int64_t full_table_rows() const { return full_table_rows_; }

 private:
  RingTables(std::unique_ptr<SparseStore> store, int64_t full_table_rows)
      : store_(std::move(store)),
        row_source_(store_.get()),
        full_table_rows_(full_table_rows),
        modulo_(&row_source_, std::max<int64_t>(full_table_rows, 1)) {}

  // The step's contributions: the all-gathered ones in rank order, or (full
  // tables) the all-reduced gradient's non-zero rows as one.
  absl::StatusOr<std::vector<std::vector<SparseRows>>> GatherRows(
      RingTransport& transport, int64_t op_id, int64_t steps_before,
      int64_t piece_bytes, absl::Time deadline);
  absl::StatusOr<std::vector<std::vector<SparseRows>>> AllReduceFullTables(
      RingTransport& transport, int64_t op_id, int64_t piece_bytes,
      absl::Time deadline);

  const std::unique_ptr<SparseStore> store_;
  SparseStoreRowSource row_source_;
  const int64_t full_table_rows_;
  ModuloRowSource modulo_;            // full tables' reads: id mod N
  std::vector<float> full_gradient_;  // full tables: T x N x dim
  std::vector<SparseRows> step_rows_;
  struct KeptUndo {
    int64_t steps_before = 0;  // the step it undoes
    SparseStepUndo undo;
  };
  std::deque<KeptUndo> undos_;  // oldest first, consecutive steps
};

}  // namespace ferry

#endif  // FERRY_WORKER_RING_TABLES_H_

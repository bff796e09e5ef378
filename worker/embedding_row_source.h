// EmbeddingRowSource: where a CTR step reads the embedding rows of a batch's
// unique ids from. In one process it is the job's SparseStore
// (SparseStoreRowSource below, num_shards 1); a distributed worker's is the
// PS client (pull of the touched rows) or its ring member's own tables.
//
// Thread safety: implementations say; the CTR step calls Read from its
// training thread, one call at a time.
#ifndef FERRY_WORKER_EMBEDDING_ROW_SOURCE_H_
#define FERRY_WORKER_EMBEDDING_ROW_SOURCE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "ps/sparse_store.h"

namespace ferry {

class EmbeddingRowSource {
 public:
  virtual ~EmbeddingRowSource() = default;

  // Writes the values of `ids` (unique within the call) of table `table` to
  // `out` [ids.size() x the table's dim], row-major: an id without a row
  // reads as the table says (its initial values once admitted, zeros
  // before). Any error is returned to the step's caller unchanged but for a
  // prefix naming the table.
  virtual absl::Status Read(int32_t table, absl::Span<const uint64_t> ids,
                            absl::Span<float> out) = 0;
};

// The rows of a SparseStore (not owned; it must outlive this object).
// REQUIRES: the store holds every id it is asked for (num_shards 1, or ids
// already routed to their shard).
class SparseStoreRowSource : public EmbeddingRowSource {
 public:
  explicit SparseStoreRowSource(const SparseStore* store) : store_(store) {}

  absl::Status Read(int32_t table, absl::Span<const uint64_t> ids,
                    absl::Span<float> out) override {
    return store_->Read(table, ids, out);
  }

 private:
  const SparseStore* store_;
};

}  // namespace ferry

#endif  // FERRY_WORKER_EMBEDDING_ROW_SOURCE_H_

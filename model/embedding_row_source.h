// EmbeddingRowSource: where a CTR step (model/ctr_step.h) reads the embedding
// rows of a batch's unique ids from, all tables in one call so that a remote
// source answers a step with one round of requests. In one process it is the
// job's SparseStore (SparseStoreRowSource, ps/sparse_store.h); a distributed
// worker's is the PS client (a row pull of the touched rows,
// ps/ps_row_source.h) or its ring member's own tables.
//
// Thread safety: implementations say; the CTR step calls Read from its
// training thread, one call at a time.
#ifndef FERRY_MODEL_EMBEDDING_ROW_SOURCE_H_
#define FERRY_MODEL_EMBEDDING_ROW_SOURCE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace ferry {

// One table's ids of a read (or of a row pull, ps/ps_client.h).
struct TableIds {
  int32_t table = 0;
  absl::Span<const uint64_t> ids;  // unique within the table's entry
};

class EmbeddingRowSource {
 public:
  virtual ~EmbeddingRowSource() = default;

  // out[i] := the values of tables[i].ids, ids.size() x that table's dim,
  // row-major (out is resized to tables.size()). An id without a row reads
  // as the table says (its initial values once admitted, zeros before).
  // Errors name the table or the peer that failed; the step returns them
  // with their code.
  virtual absl::Status Read(absl::Span<const TableIds> tables,
                            std::vector<std::vector<float>>& out) = 0;
};

}  // namespace ferry

#endif  // FERRY_MODEL_EMBEDDING_ROW_SOURCE_H_

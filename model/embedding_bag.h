// Embedding bags over hash-keyed tables, as pure host functions: the sparse
// half of a CTR model (docs/sparse.md, "Model"). Nothing here knows where the
// rows live: a caller deduplicates a batch's ids (DeduplicateIds), fetches the
// values of those unique rows from wherever they are (a local table, the
// parameter-server shards), pools them into per-sample embeddings
// (GatherPooled), and after the backward pass turns the pooled gradients into
// one gradient per unique row (ScatterRowGradients), which is what it pushes.
//
// Semantics are PyTorch's nn.EmbeddingBag(mode='sum' | 'mean') with offsets,
// one bag per (sample, field), field f looking up table f: an empty bag pools
// to zeros (and receives no gradient), mean divides the sum by the bag size.
//
// Thread safety: pure functions of their arguments.
#ifndef FERRY_MODEL_EMBEDDING_BAG_H_
#define FERRY_MODEL_EMBEDDING_BAG_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ferry {

// The categorical part of a batch: `batch` samples of `num_fields` bags each.
// Bag b = sample * num_fields + field holds ids[offsets[b], offsets[b + 1]).
// Criteo has exactly one id per field, but a bag may hold any number (0 too).
struct SparseBatch {
  int batch = 0;
  int num_fields = 0;
  // batch * num_fields + 1 entries: offsets[0] == 0, non-decreasing,
  // offsets.back() == ids.size().
  std::vector<int32_t> offsets;
  std::vector<uint64_t> ids;
};

// One table's part of a step's embedding gradient (or of a contribution to
// a store): ids (unique) and d(loss sum)/d(row) summed over the step's
// samples, ids.size() x dim.
struct SparseRows {
  int32_t table = 0;
  std::vector<uint64_t> ids;
  std::vector<float> grads;
};

// One CTR batch as the data layer stages it (data/ctr_dataset.h), in
// SparseBatch's layout: the trainer moves `offsets` and `ids` across.
struct CtrBatch {
  int batch = 0;                 // samples
  int num_fields = 0;            // categorical fields
  std::vector<float> dense;      // [batch, dense features], transformed
  std::vector<float> labels;     // [batch], 0 or 1
  std::vector<int32_t> offsets;  // batch * num_fields + 1 entries
  // Bag b = sample * num_fields + field spans ids[offsets[b], offsets[b+1]);
  // field f's ids are keys of table f.
  std::vector<uint64_t> ids;
};

// INVALID_ARGUMENT, naming the first offending entry, unless batch >= 0,
// num_fields >= 0 and the offsets are as SparseBatch says.
absl::Status ValidateSparseBatch(const SparseBatch& batch);

// A batch's distinct rows. Only these are fetched, and only their gradients
// are pushed.
struct UniqueRows {
  // Per table (num_fields of them), the distinct ids of its bags in the order
  // they first occur in SparseBatch::ids.
  std::vector<std::vector<uint64_t>> ids;
  // Per entry k of SparseBatch::ids (in table t, the field of its bag): the
  // index of that id in ids[t], so its row is row_of[k] of table t's values.
  std::vector<int32_t> row_of;
};

// Deduplicates per table (the same id in two fields is two rows). Linear time
// (absl::flat_hash_map). INVALID_ARGUMENT when ValidateSparseBatch fails.
absl::StatusOr<UniqueRows> DeduplicateIds(const SparseBatch& batch);

enum class Pooling { kSum, kMean };

// "sum" / "mean".
const char* PoolingName(Pooling pooling);
// INVALID_ARGUMENT for anything but "sum" and "mean".
absl::StatusOr<Pooling> ParsePooling(std::string_view name);

// The forward pass: pooled[b * dim + e] (row-major [batch, num_fields, dim])
// is the sum over the ids of bag b of their rows' element e, divided by the
// bag size for kMean; 0 for an empty bag. rows[t] holds table t's values for
// unique.ids[t], [unique.ids[t].size() x dim] row-major. Sums run in the order
// of the ids in the bag (deterministic).
// INVALID_ARGUMENT (nothing written) for a malformed batch, `unique` not from
// DeduplicateIds(batch) (counts, indices out of range), dim < 0, a rows[t] of
// the wrong size or a `pooled` that is not batch * num_fields * dim long.
absl::Status GatherPooled(const SparseBatch& batch, const UniqueRows& unique,
                          const std::vector<absl::Span<const float>>& rows,
                          int dim, Pooling pooling, absl::Span<float> pooled);

// The backward pass of GatherPooled: given d_pooled [batch, num_fields, dim]
// (d loss / d pooled), overwrites row_grads[t] ([unique.ids[t].size() x dim])
// with d loss / d row: the sum, over every occurrence of the id in table t's
// bags, of its bag's d_pooled (divided by the bag size for kMean). Rows are
// accumulated in the order of SparseBatch::ids (deterministic).
// INVALID_ARGUMENT (nothing written) as for GatherPooled.
absl::Status ScatterRowGradients(
    const SparseBatch& batch, const UniqueRows& unique,
    absl::Span<const float> d_pooled, int dim, Pooling pooling,
    const std::vector<absl::Span<float>>& row_grads);

}  // namespace ferry

#endif  // FERRY_MODEL_EMBEDDING_BAG_H_

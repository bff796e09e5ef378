// Placement of parameter chunks on PS shards: a pure function of the tensor
// sizes, the shard count and the largest chunk, balanced by bytes.
//
// Shard s owns the contiguous flat range [s*T/S, (s+1)*T/S) (integer floor) of
// the T parameter elements, so loads differ by at most one element. That range
// is cut into chunks at tensor boundaries and every `max_chunk_elements`, so a
// chunk never spans two tensors or two shards. Chunks are listed in flat order
// and numbered 0..n-1; every element belongs to exactly one chunk.
#ifndef FERRY_COMMON_SHARDING_H_
#define FERRY_COMMON_SHARDING_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ferry {

struct Chunk {
  int32_t id = 0;
  int32_t tensor = 0;            // index into the tensor list
  int64_t offset_in_tensor = 0;  // first element within the tensor
  int64_t flat_offset = 0;       // first element within the flat buffer
  int64_t length = 0;            // elements, >= 1
  int32_t shard = 0;
};

// Default chunk size: 1 MiB of fp32.
inline constexpr int64_t kDefaultMaxChunkElements = 256 * 1024;

// INVALID_ARGUMENT when num_shards < 1, max_chunk_elements < 1 or a size is
// negative; RESOURCE_EXHAUSTED beyond kMaxShardsPerJob shards,
// kMaxModelElements elements or kMaxChunksPerJob chunks (common/peer_limits.h).
// Zero-sized tensors produce no chunk.
absl::StatusOr<std::vector<Chunk>> PlaceChunks(
    absl::Span<const int64_t> tensor_sizes, int num_shards,
    int64_t max_chunk_elements = kDefaultMaxChunkElements);

// The flat range [begin, end) owned by `shard` of `num_shards` over `total`.
struct FlatRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const FlatRange&) const = default;
};
FlatRange ShardRange(int64_t total, int num_shards, int shard);

// Whether a pull of `range` carries `chunk`: the chunk shares an element
// with it, or range.end == 0 (a pull of the whole buffer). Chunks end at
// tensor boundaries, so a range of whole tensors (a pipeline stage's
// layers) is pulled exactly.
inline bool ChunkInPullRange(const Chunk& chunk, FlatRange range) {
  return range.end == 0 || (chunk.flat_offset < range.end &&
                            chunk.flat_offset + chunk.length > range.begin);
}

// The part of each of `slices` inside [begin, end), relative to begin:
// element q is slices[q] clamped to [begin, end) and shifted by -begin
// (empty, with begin == end, where they miss). Slices that tile a buffer
// give shares that tile [0, end - begin). Pure.
std::vector<FlatRange> SharesOfRange(const std::vector<FlatRange>& slices,
                                     int64_t begin, int64_t end);

// The elements of `chunk` that a pull of `range` lands ({0, 0}: every
// one), as a flat range; empty (begin >= end) when none.
inline FlatRange ChunkPartInRange(const Chunk& chunk, FlatRange range) {
  const int64_t end = chunk.flat_offset + chunk.length;
  if (range.end == 0) return {chunk.flat_offset, end};
  return {chunk.flat_offset > range.begin ? chunk.flat_offset : range.begin,
          end < range.end ? end : range.end};
}

// The shard that holds row `id` of embedding table `table`: a fixed hash of
// (table, id) modulo num_shards (splitmix64's finalizer over the id mixed
// with the table), so rows spread evenly whatever the ids' distribution and
// every process computes the same placement. Part of the checkpoint format:
// never change it. REQUIRES: num_shards >= 1.
int32_t ShardOfRow(int32_t table, uint64_t id, int32_t num_shards);

// Elements per shard for a placement (index = shard).
std::vector<int64_t> ShardLoads(absl::Span<const Chunk> chunks, int num_shards);

}  // namespace ferry

#endif  // FERRY_COMMON_SHARDING_H_

// Placement of parameter chunks on PS shards: a pure function of the tensor
// sizes, the shard count, the largest chunk and where chunks must be cut,
// balanced by bytes.
//
// Shard s owns the contiguous flat range [s*T/S, (s+1)*T/S) (integer floor) of
// the T parameter elements, so loads differ by at most one element. That range
// is cut into chunks every `max_chunk_elements` and at ChunkCuts' offsets, and
// either at every tensor boundary (a chunk holds part of one tensor) or not
// (consecutive tensors share a chunk: a model's many small tensors, biases and
// norms, travel as a few messages instead of one each, as DDP's and BytePS's
// buckets do). A chunk never spans two shards. Chunks are listed in flat order
// and numbered 0..n-1; every element belongs to exactly one chunk.
#ifndef FERRY_COMMON_SHARDING_H_
#define FERRY_COMMON_SHARDING_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ferry {

struct Chunk {
  int32_t id = 0;
  int32_t tensor = 0;            // the tensor holding the chunk's first element
  int64_t offset_in_tensor = 0;  // first element within that tensor
  int64_t flat_offset = 0;       // first element within the flat buffer
  int64_t length = 0;            // elements, >= 1
  int32_t shard = 0;
};

// Default chunk size: 1 MiB of fp32.
inline constexpr int64_t kDefaultMaxChunkElements = 256 * 1024;

// Where PlaceChunks cuts besides shard boundaries and every
// max_chunk_elements. Every process of a job must place with the same cuts
// (proto/job_convert.h JobChunkCuts derives them from the job).
struct ChunkCuts {
  // true: at every tensor boundary, so a chunk holds part of one tensor
  // (jobs before JobSpec.pack_chunks, pipeline jobs: a stage pulls and
  // pushes exactly its layers' chunks); false: tensors share chunks.
  bool at_tensor_boundaries = true;
  // Flat offsets that always cut (where BatchNorm state begins: it travels
  // uncompressed); offsets outside the buffer are ignored.
  std::vector<int64_t> at;
};
// Cuts that pack tensors and cut at `at`.
inline ChunkCuts PackedChunkCuts(std::vector<int64_t> at = {}) {
  ChunkCuts cuts;
  cuts.at_tensor_boundaries = false;
  cuts.at = std::move(at);
  return cuts;
}

// INVALID_ARGUMENT when num_shards < 1, max_chunk_elements < 1 or a size is
// negative; RESOURCE_EXHAUSTED beyond kMaxShardsPerJob shards,
// kMaxModelElements elements or kMaxChunksPerJob chunks (common/peer_limits.h).
// Zero-sized tensors produce no chunk.
absl::StatusOr<std::vector<Chunk>> PlaceChunks(
    absl::Span<const int64_t> tensor_sizes, int num_shards,
    int64_t max_chunk_elements = kDefaultMaxChunkElements,
    const ChunkCuts& cuts = {});

// The flat range [begin, end) owned by `shard` of `num_shards` over `total`.
struct FlatRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const FlatRange&) const = default;
};
FlatRange ShardRange(int64_t total, int num_shards, int shard);

// Whether a pull of `range` carries `chunk`: the chunk shares an element
// with it, or range.end == 0 (a pull of the whole buffer). With chunks cut
// at tensor boundaries a range of whole tensors (a pipeline stage's layers)
// is pulled exactly; otherwise a chunk may stick out of it.
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

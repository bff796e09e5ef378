#include "common/sharding.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/peer_limits.h"

namespace ferry {

FlatRange ShardRange(int64_t total, int num_shards, int shard) {
  // 128-bit free: total * shard fits in int64 for any realistic model.
  return FlatRange{total * shard / num_shards,
                   total * (shard + 1) / num_shards};
}

absl::StatusOr<std::vector<Chunk>> PlaceChunks(
    absl::Span<const int64_t> tensor_sizes, int num_shards,
    int64_t max_chunk_elements, const ChunkCuts& cuts) {
  if (num_shards < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("num_shards must be >= 1, got %d", num_shards));
  }
  if (max_chunk_elements < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max_chunk_elements must be >= 1, got %d", max_chunk_elements));
  }
  if (num_shards > kMaxShardsPerJob) {
    return LimitExceeded("the number of PS shards", num_shards,
                         kMaxShardsPerJob);
  }
  int64_t total = 0;
  for (size_t i = 0; i < tensor_sizes.size(); ++i) {
    if (tensor_sizes[i] < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tensor %d has negative size %d", i, tensor_sizes[i]));
    }
    if (tensor_sizes[i] > kMaxModelElements - total) {
      return LimitExceeded("the number of parameter elements",
                           tensor_sizes[i] > kMaxModelElements
                               ? tensor_sizes[i]
                               : total + tensor_sizes[i],
                           kMaxModelElements);
    }
    total += tensor_sizes[i];
  }

  // Every offset where a chunk must end besides the shards' ends and
  // max_chunk_elements, in order.
  std::vector<int64_t> cut_at;
  if (cuts.at_tensor_boundaries) {
    int64_t end = 0;
    for (int64_t size : tensor_sizes) cut_at.push_back(end += size);
  }
  for (int64_t offset : cuts.at) {
    if (offset > 0 && offset < total) cut_at.push_back(offset);
  }
  std::sort(cut_at.begin(), cut_at.end());
  std::vector<Chunk> chunks;
  auto next_cut = cut_at.begin();
  size_t tensor = 0;         // the tensor holding `pos`
  int64_t tensor_begin = 0;  // its first element
  for (int shard = 0; shard < num_shards; ++shard) {
    const FlatRange owned = ShardRange(total, num_shards, shard);
    for (int64_t pos = owned.begin; pos < owned.end;) {
      while (next_cut != cut_at.end() && *next_cut <= pos) ++next_cut;
      int64_t end = std::min(owned.end, pos + max_chunk_elements);
      if (next_cut != cut_at.end()) end = std::min(end, *next_cut);
      if (static_cast<int64_t>(chunks.size()) == kMaxChunksPerJob) {
        return LimitExceeded(
            absl::StrFormat("the number of chunks (max_chunk_elements %d)",
                            max_chunk_elements),
            kMaxChunksPerJob + 1, kMaxChunksPerJob);
      }
      while (tensor_begin + tensor_sizes[tensor] <= pos) {
        tensor_begin += tensor_sizes[tensor++];
      }
      Chunk chunk;
      chunk.id = static_cast<int32_t>(chunks.size());
      chunk.tensor = static_cast<int32_t>(tensor);
      chunk.offset_in_tensor = pos - tensor_begin;
      chunk.flat_offset = pos;
      chunk.length = end - pos;
      chunk.shard = shard;
      chunks.push_back(chunk);
      pos = end;
    }
  }
  return chunks;
}

std::vector<int64_t> ShardLoads(absl::Span<const Chunk> chunks,
                                int num_shards) {
  std::vector<int64_t> loads(std::max(num_shards, 0), 0);
  for (const Chunk& c : chunks) {
    if (c.shard >= 0 && c.shard < num_shards) loads[c.shard] += c.length;
  }
  return loads;
}

int32_t ShardOfRow(int32_t table, uint64_t id, int32_t num_shards) {
  uint64_t z = id ^ (static_cast<uint64_t>(static_cast<uint32_t>(table)) *
                     0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<int32_t>(z % static_cast<uint64_t>(num_shards));
}

std::vector<FlatRange> SharesOfRange(const std::vector<FlatRange>& slices,
                                     int64_t begin, int64_t end) {
  std::vector<FlatRange> shares;
  shares.reserve(slices.size());
  for (const FlatRange& slice : slices) {
    const int64_t b = std::clamp(slice.begin, begin, end) - begin;
    const int64_t e = std::clamp(slice.end, begin, end) - begin;
    shares.push_back({b, std::max(b, e)});
  }
  return shares;
}

}  // namespace ferry

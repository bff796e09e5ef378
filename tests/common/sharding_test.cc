#include "common/sharding.h"

#include <algorithm>
#include <numeric>

#include "gtest/gtest.h"

namespace ferry {
namespace {

// Every element of every tensor belongs to exactly one chunk; chunks are in
// flat order, never span a shard boundary or one of `cuts.at`, span a tensor
// boundary only when cuts allow it, and respect the limit.
void ExpectValidPlacement(const std::vector<int64_t>& sizes, int shards,
                          int64_t max_chunk, const ChunkCuts& cuts = {}) {
  SCOPED_TRACE(::testing::Message()
               << "shards=" << shards << " max_chunk=" << max_chunk
               << " at_tensor_boundaries=" << cuts.at_tensor_boundaries);
  auto placed = PlaceChunks(sizes, shards, max_chunk, cuts);
  ASSERT_TRUE(placed.ok()) << placed.status();
  const std::vector<Chunk>& chunks = *placed;
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  int64_t expected_flat = 0;
  std::vector<int64_t> tensor_starts(sizes.size());
  for (size_t t = 0, off = 0; t < sizes.size(); off += sizes[t], ++t)
    tensor_starts[t] = off;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const Chunk& c = chunks[i];
    EXPECT_EQ(c.id, static_cast<int>(i));
    EXPECT_EQ(c.flat_offset, expected_flat);
    EXPECT_GE(c.length, 1);
    EXPECT_LE(c.length, max_chunk);
    ASSERT_GE(c.tensor, 0);
    ASSERT_LT(c.tensor, static_cast<int>(sizes.size()));
    EXPECT_EQ(tensor_starts[c.tensor] + c.offset_in_tensor, c.flat_offset);
    EXPECT_LT(c.offset_in_tensor, sizes[c.tensor]);
    if (cuts.at_tensor_boundaries) {
      EXPECT_LE(c.offset_in_tensor + c.length, sizes[c.tensor]);
    }
    for (int64_t cut : cuts.at) {
      EXPECT_FALSE(c.flat_offset < cut && cut < c.flat_offset + c.length)
          << "chunk " << i << " spans the cut at " << cut;
    }
    const FlatRange r = ShardRange(total, shards, c.shard);
    EXPECT_GE(c.flat_offset, r.begin);
    EXPECT_LE(c.flat_offset + c.length, r.end);
    expected_flat += c.length;
  }
  EXPECT_EQ(expected_flat, total);
  const std::vector<int64_t> loads = ShardLoads(chunks, shards);
  const auto [lo, hi] = std::minmax_element(loads.begin(), loads.end());
  EXPECT_LE(*hi - *lo, 1) << "loads differ by more than one element";
}

TEST(ShardingTest, CoversEveryElementExactlyOnceForAwkwardSizes) {
  const std::vector<std::vector<int64_t>> models = {
      {},
      {0},
      {1},
      {0, 0, 5},
      {7},
      {13, 0, 1, 2},
      {200704, 256, 32768, 128, 1280, 10},
      {97, 89, 83, 79, 73},
      {1000003}};
  for (const auto& sizes : models) {
    const int64_t total =
        std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
    for (int shards : {1, 2, 3, 5, 7, 8, 16}) {
      for (int64_t max_chunk :
           {int64_t{1}, int64_t{3}, int64_t{64}, int64_t{1} << 18}) {
        if (max_chunk == 1 && total > 5000) continue;
        ExpectValidPlacement(sizes, shards, max_chunk);
        ExpectValidPlacement(sizes, shards, max_chunk, PackedChunkCuts());
        ExpectValidPlacement(sizes, shards, max_chunk,
                             PackedChunkCuts({total - 3, -1, total + 1}));
      }
    }
  }
}

TEST(ShardingTest, PackedTensorsShareChunksUpToTheLimitAndTheCuts) {
  // A transformer-like model: one large tensor, then many small ones.
  const std::vector<int64_t> sizes = {4096, 8, 8, 16, 16, 16, 16, 4096, 8, 8};
  auto per_tensor = PlaceChunks(sizes, 1, 8192);
  ASSERT_TRUE(per_tensor.ok());
  EXPECT_EQ(per_tensor->size(), sizes.size());
  auto packed = PlaceChunks(sizes, 1, 8192, PackedChunkCuts());
  ASSERT_TRUE(packed.ok());
  ASSERT_EQ(packed->size(), 2u);  // 8288 elements, 8192 at most a chunk
  EXPECT_EQ((*packed)[0].length, 8192);
  EXPECT_EQ((*packed)[1].flat_offset, 8192);
  EXPECT_EQ((*packed)[1].tensor, 7);
  EXPECT_EQ((*packed)[1].offset_in_tensor, 8192 - 4096 - 80);
  // Two shards: the shards' boundary still cuts, so does a state cut.
  auto two = PlaceChunks(sizes, 2, 8192, PackedChunkCuts({8272}));
  ASSERT_TRUE(two.ok());
  ASSERT_EQ(two->size(), 3u);
  EXPECT_EQ((*two)[0].length, 4144);  // shard 0: [0, 4144)
  EXPECT_EQ((*two)[1].flat_offset, 4144);
  EXPECT_EQ((*two)[1].length, 8272 - 4144);
  EXPECT_EQ((*two)[2].flat_offset, 8272);
  EXPECT_EQ((*two)[2].length, 16);
  EXPECT_EQ((*two)[2].shard, 1);
}

TEST(ShardingTest, DefaultMlpIsBalancedWithinFivePercentOnOneToEightShards) {
  const std::vector<int64_t> mlp = {200704, 256, 32768, 128, 1280, 10};
  for (int shards = 1; shards <= 8; ++shards) {
    auto chunks = PlaceChunks(mlp, shards);
    ASSERT_TRUE(chunks.ok());
    const std::vector<int64_t> loads = ShardLoads(*chunks, shards);
    const double mean = 235146.0 / shards;
    const double max = *std::max_element(loads.begin(), loads.end());
    EXPECT_LE(max / mean, 1.05) << shards << " shards";
  }
}

TEST(ShardingTest, MoreShardsThanElementsLeavesSomeShardsEmpty) {
  auto chunks = PlaceChunks({3}, 5, 10);
  ASSERT_TRUE(chunks.ok());
  EXPECT_EQ(chunks->size(), 3u);
  const std::vector<int64_t> loads = ShardLoads(*chunks, 5);
  EXPECT_EQ(std::accumulate(loads.begin(), loads.end(), int64_t{0}), 3);
}

TEST(ShardingTest, RejectsInvalidArguments) {
  EXPECT_EQ(PlaceChunks({10}, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlaceChunks({10}, 2, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlaceChunks({10, -1}, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ShardingTest, PlacementIsAPureFunction) {
  auto a = PlaceChunks({1000, 17, 4}, 3, 100);
  auto b = PlaceChunks({1000, 17, 4}, 3, 100);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].flat_offset, (*b)[i].flat_offset);
    EXPECT_EQ((*a)[i].shard, (*b)[i].shard);
  }
}

TEST(ShardOfRowTest, InRangeAndStable) {
  for (int32_t shards : {1, 2, 3, 4, 7, 64}) {
    for (uint64_t id : {uint64_t{0}, uint64_t{1}, uint64_t{1} << 32,
                        ~uint64_t{0}, uint64_t{0x68fd1e64}}) {
      const int32_t s = ShardOfRow(5, id, shards);
      EXPECT_GE(s, 0);
      EXPECT_LT(s, shards);
      EXPECT_EQ(s, ShardOfRow(5, id, shards));
    }
  }
  // The placement is part of the checkpoint format: pinned values.
  EXPECT_EQ(ShardOfRow(0, 0, 1000003), 0);
  EXPECT_EQ(ShardOfRow(3, 12345, 1000003), 517850);
  EXPECT_EQ(ShardOfRow(25, uint64_t{1} << 32, 1000003), 729883);
}

TEST(ShardOfRowTest, SpreadsConsecutiveAndStridedIdsEvenly) {
  for (int32_t shards : {2, 3, 4, 7}) {
    for (uint64_t stride : {uint64_t{1}, uint64_t{4}, uint64_t{1} << 20}) {
      std::vector<int64_t> counts(shards, 0);
      const int n = 70000;
      for (int i = 0; i < n; ++i) ++counts[ShardOfRow(1, i * stride, shards)];
      for (int64_t c : counts) {
        EXPECT_NEAR(static_cast<double>(c), static_cast<double>(n) / shards,
                    0.03 * n / shards)
            << "shards " << shards << " stride " << stride;
      }
    }
  }
}

TEST(ShardOfRowTest, TablesPlaceTheSameIdIndependently) {
  int same = 0;
  const int n = 10000;
  for (int i = 0; i < n; ++i)
    same += ShardOfRow(0, i, 4) == ShardOfRow(1, i, 4);
  EXPECT_NEAR(same, n / 4, n / 20);  // independent: 1 in 4 agree
}

}  // namespace
}  // namespace ferry

#include "data/sampler.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

bool IsPermutation(const std::vector<int64_t>& order, int64_t n) {
  if (static_cast<int64_t>(order.size()) != n) return false;
  std::vector<bool> seen(n, false);
  for (int64_t x : order) {
    if (x < 0 || x >= n || seen[x]) return false;
    seen[x] = true;
  }
  return true;
}

TEST(EpochPermutationTest, IsPermutationForManySizes) {
  for (int64_t n : {0, 1, 2, 3, 7, 128, 1000, 60000}) {
    EXPECT_TRUE(IsPermutation(EpochPermutation(n, 0, 0, true), n)) << n;
    EXPECT_TRUE(IsPermutation(EpochPermutation(n, 123, 9, true), n)) << n;
  }
  EXPECT_TRUE(EpochPermutation(-5, 0, 0, true).empty());
}

TEST(EpochPermutationTest, DeterministicPerSeedAndEpoch) {
  const std::vector<int64_t> a = EpochPermutation(60000, 42, 3, true);
  EXPECT_EQ(a, EpochPermutation(60000, 42, 3, true));
  EXPECT_NE(a, EpochPermutation(60000, 42, 4, true));
  EXPECT_NE(a, EpochPermutation(60000, 43, 3, true));
  // Mixing as torch does: the generator is seeded with seed + epoch.
  EXPECT_EQ(a, EpochPermutation(60000, 45, 0, true));
}

TEST(EpochPermutationTest, DiffersAcrossEpochsAndActuallyShuffles) {
  const int64_t n = 1000;
  std::vector<int64_t> identity(n);
  std::iota(identity.begin(), identity.end(), int64_t{0});
  std::vector<std::vector<int64_t>> epochs;
  for (int64_t epoch = 0; epoch < 5; ++epoch) {
    epochs.push_back(EpochPermutation(n, 7, epoch, true));
    EXPECT_NE(epochs.back(), identity);
    int fixed_points = 0;
    for (int64_t i = 0; i < n; ++i) fixed_points += epochs.back()[i] == i;
    EXPECT_LT(fixed_points, 10);  // ~1 expected for a random permutation
  }
  for (size_t i = 0; i < epochs.size(); ++i) {
    for (size_t j = i + 1; j < epochs.size(); ++j) {
      EXPECT_NE(epochs[i], epochs[j]);
    }
  }
}

TEST(EpochPermutationTest, NoShuffleIsIdentity) {
  std::vector<int64_t> identity(7);
  std::iota(identity.begin(), identity.end(), int64_t{0});
  EXPECT_EQ(EpochPermutation(7, 42, 3, false), identity);
}

TEST(EpochPermutationTest, PinnedValues) {
  // Every worker must derive the same order on any platform; the algorithm is
  // fixed (Fisher-Yates, mt19937_64, rejection sampling), so this never
  // changes.
  EXPECT_EQ(EpochPermutation(10, 42, 0, true),
            (std::vector<int64_t>{1, 7, 9, 0, 3, 8, 4, 2, 5, 6}));
}

TEST(EpochPermutationTest, FirstPositionIsRoughlyUniform) {
  // Over many epochs, each of 4 samples comes first about a quarter of the
  // time.
  std::vector<int> first(4, 0);
  for (int64_t epoch = 0; epoch < 4000; ++epoch) {
    ++first[EpochPermutation(4, 1, epoch, true)[0]];
  }
  for (int count : first) {
    EXPECT_GT(count, 850);
    EXPECT_LT(count, 1150);
  }
}

TEST(SplitIntoTasksTest, CoversEveryPositionExactlyOnce) {
  for (int64_t n : {0, 1, 7, 60000}) {
    for (int64_t per_task : {1, 3, 128, 1000, 60001}) {
      absl::StatusOr<std::vector<DataTask>> tasks =
          SplitIntoTasks(n, per_task, 2);
      ASSERT_TRUE(tasks.ok()) << tasks.status();
      const int64_t expected_tasks = (n + per_task - 1) / per_task;
      ASSERT_EQ(static_cast<int64_t>(tasks->size()), expected_tasks)
          << n << " " << per_task;
      std::vector<int> covered(n, 0);
      int64_t next = 0;
      for (size_t t = 0; t < tasks->size(); ++t) {
        const DataTask& task = (*tasks)[t];
        EXPECT_EQ(task.epoch, 2);
        EXPECT_EQ(task.task_id, static_cast<int64_t>(t));
        EXPECT_EQ(task.begin, next);
        EXPECT_GT(task.size(), 0);
        EXPECT_LE(task.size(), per_task);
        if (t + 1 < tasks->size()) {
          EXPECT_EQ(task.size(), per_task);
        }
        for (int64_t p = task.begin; p < task.end; ++p) ++covered[p];
        next = task.end;
      }
      EXPECT_EQ(next, n);
      EXPECT_TRUE(std::all_of(covered.begin(), covered.end(),
                              [](int c) { return c == 1; }))
          << n << " " << per_task;
    }
  }
}

TEST(SplitIntoTasksTest, UnevenSplit) {
  absl::StatusOr<std::vector<DataTask>> tasks = SplitIntoTasks(7, 3, 0);
  ASSERT_TRUE(tasks.ok());
  EXPECT_EQ(*tasks,
            (std::vector<DataTask>{{0, 0, 0, 3}, {0, 1, 3, 6}, {0, 2, 6, 7}}));
}

TEST(SplitIntoTasksTest, InvalidArguments) {
  EXPECT_EQ(SplitIntoTasks(10, 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SplitIntoTasks(10, -1, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SplitIntoTasks(-1, 3, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SplitIntoTasks(10, 3, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ShardForRankTest, UnionCoversAllPositions) {
  for (int64_t n : {0, 1, 2, 7, 10, 13, 1000}) {
    for (int world = 1; world <= 5; ++world) {
      for (bool drop_last : {false, true}) {
        std::vector<int> covered(n, 0);
        size_t per_rank = 0;
        for (int rank = 0; rank < world; ++rank) {
          absl::StatusOr<std::vector<int64_t>> shard =
              ShardForRank(n, world, rank, drop_last);
          ASSERT_TRUE(shard.ok()) << shard.status();
          if (rank == 0) per_rank = shard->size();
          EXPECT_EQ(shard->size(), per_rank) << "ranks get equal counts";
          for (int64_t p : *shard) {
            ASSERT_GE(p, 0);
            ASSERT_LT(p, n);
            ++covered[p];
          }
        }
        if (drop_last) {
          EXPECT_EQ(per_rank, static_cast<size_t>(n / world));
          // The first floor(n / world) * world positions, each once.
          for (int64_t p = 0; p < n; ++p) {
            EXPECT_EQ(covered[p], p < (n / world) * world ? 1 : 0);
          }
        } else {
          EXPECT_EQ(per_rank, static_cast<size_t>((n + world - 1) / world));
          // Everything at least once; padding wraps around to position 0
          // (more than once when world > n): padded position q is q % n.
          const int64_t total = static_cast<int64_t>(per_rank) * world;
          for (int64_t p = 0; p < n; ++p) {
            EXPECT_GE(covered[p], 1);
            EXPECT_EQ(covered[p], (total - p + n - 1) / n) << n << " " << world;
          }
        }
      }
    }
  }
}

TEST(ShardForRankTest, MatchesDistributedSampler) {
  // torch: indices = range(7) padded to 9 -> [0..6, 0, 1]; rank r takes
  // indices[r::3].
  EXPECT_EQ(*ShardForRank(7, 3, 0, false), (std::vector<int64_t>{0, 3, 6}));
  EXPECT_EQ(*ShardForRank(7, 3, 1, false), (std::vector<int64_t>{1, 4, 0}));
  EXPECT_EQ(*ShardForRank(7, 3, 2, false), (std::vector<int64_t>{2, 5, 1}));
  EXPECT_EQ(*ShardForRank(7, 3, 2, true), (std::vector<int64_t>{2, 5}));
  // More ranks than samples: padding wraps around more than once.
  EXPECT_EQ(*ShardForRank(2, 5, 4, false), (std::vector<int64_t>{0}));
}

TEST(ShardForRankTest, InvalidArguments) {
  EXPECT_EQ(ShardForRank(10, 0, 0, false).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ShardForRank(10, 3, 3, false).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ShardForRank(10, 3, -1, false).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ShardForRank(-1, 3, 0, true).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ferry

#include "ps/sparse_store.h"

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <vector>

#include "common/sharding.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

SparseStoreConfig Config(int shards = 1, int shard = 0) {
  SparseStoreConfig c;
  c.shard_id = shard;
  c.num_shards = shards;
  c.dims = {2, 3};
  c.optimizer.kind = RowOptimizerKind::kSgd;
  c.optimizer.lr = 1.0f;
  c.seed = 5;
  c.init_scale = 0.1f;
  return c;
}

std::unique_ptr<SparseStore> Make(const SparseStoreConfig& c) {
  auto s = SparseStore::Create(c);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

std::vector<float> Read(const SparseStore& s, int32_t table,
                        std::vector<uint64_t> ids) {
  std::vector<float> out(ids.size() * s.table(table).dim());
  EXPECT_TRUE(s.Read(table, ids, absl::MakeSpan(out)).ok());
  return out;
}

// Ids of `table` placed on `shard` of `shards`.
std::vector<uint64_t> IdsOn(int32_t table, int shard, int shards, int n) {
  std::vector<uint64_t> ids;
  for (uint64_t id = 0; static_cast<int>(ids.size()) < n; ++id) {
    if (ShardOfRow(table, id, shards) == shard) ids.push_back(id);
  }
  return ids;
}

TEST(SparseStore, RejectsBadConfigs) {
  SparseStoreConfig c = Config();
  c.dims.clear();
  EXPECT_FALSE(SparseStore::Create(c).ok());
  c = Config(2, 2);
  EXPECT_FALSE(SparseStore::Create(c).ok());
  c = Config();
  c.dims = {2, 0};
  EXPECT_THAT(SparseStore::Create(c).status().message(),
              HasSubstr("embedding table 1: dim 0"));
  c = Config();
  c.ttl_steps = -1;
  EXPECT_FALSE(SparseStore::Create(c).ok());
}

TEST(SparseStore, AStepAppliesTheMeanOfTheContributionsInOrder) {
  auto s = Make(Config());
  const std::vector<float> before = Read(*s, 0, {1, 2});
  const std::vector<SparseRows> a = {{0, {1, 2}, {1, 2, 3, 4}}};
  const std::vector<SparseRows> b = {{0, {2}, {10, 20}}, {1, {7}, {1, 1, 1}}};
  const std::vector<const std::vector<SparseRows>*> step = {&a, &b};
  ASSERT_TRUE(s->ApplyStep(step, 4, 0).ok());
  const std::vector<float> after = Read(*s, 0, {1, 2});
  EXPECT_FLOAT_EQ(after[0], before[0] - 1.0f / 4);
  EXPECT_FLOAT_EQ(after[1], before[1] - 2.0f / 4);
  EXPECT_FLOAT_EQ(after[2], before[2] - 13.0f / 4);
  EXPECT_FLOAT_EQ(after[3], before[3] - 24.0f / 4);
  EXPECT_EQ(s->table(1).rows(), 1);
  EXPECT_EQ(s->Stats().total.rows, 3);
}

TEST(SparseStore, RefusesBadContributionsAndChangesNothing) {
  auto s = Make(Config(2, 0));
  const std::vector<uint64_t> mine = IdsOn(0, 0, 2, 2);
  const std::vector<uint64_t> theirs = IdsOn(0, 1, 2, 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<SparseRows> good = {{0, mine, {1, 1, 1, 1}}};
  struct Case {
    std::vector<SparseRows> rows;
    std::string error;
  };
  const std::vector<Case> cases = {
      {{{2, mine, {1, 1, 1, 1}}}, "table 2 does not exist"},
      {{{0, theirs, {1, 1}}}, "belongs on shard 1, not shard 0"},
      {{{0, {mine[0], mine[0]}, {1, 1, 1, 1}}}, "appears twice"},
      {{{0, mine, {1, 1, 1}}}, "2 ids with 3 gradient floats"},
      {{{0, mine, {1, nan, 1, 1}}}, "non-finite gradient"},
      {{{0, {mine[0]}, {1, 1}}, {0, {mine[1]}, {1, 1}}},
       "table 0 appears twice"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(s->CheckRows(c.rows).message(), HasSubstr(c.error));
    const std::vector<const std::vector<SparseRows>*> step = {&good, &c.rows};
    const absl::Status status = s->ApplyStep(step, 2, 0);
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_EQ(s->Stats().total.rows, 0) << c.error;
  }
  std::vector<float> out(2);
  EXPECT_THAT(s->Read(0, theirs, absl::MakeSpan(out)).message(),
              HasSubstr("belongs on shard 1"));
  EXPECT_THAT(s->Read(5, mine, absl::MakeSpan(out)).message(),
              HasSubstr("does not exist"));
}

TEST(SparseStore, AnOverflowingMeanChangesNoTable) {
  auto s = Make(Config());
  const float big = 3e38f;
  const std::vector<SparseRows> a = {{0, {1}, {1, 1}}, {1, {2}, {big, 0, 0}}};
  const std::vector<SparseRows> b = {{1, {2}, {big, 0, 0}}};
  const absl::Status status = s->ApplyStep({&a, &b}, 1, 0);
  EXPECT_THAT(status.message(), HasSubstr("id 2 overflows"));
  EXPECT_EQ(s->Stats().total.rows, 0);  // table 0's row was not created
}

TEST(SparseStore, ShardsTogetherActLikeOneStore) {
  // The same steps split by placement over 3 shards give the rows one
  // store gives.
  auto whole = Make(Config());
  std::vector<std::unique_ptr<SparseStore>> shards;
  for (int k = 0; k < 3; ++k) shards.push_back(Make(Config(3, k)));
  for (int step = 0; step < 4; ++step) {
    std::vector<SparseRows> all = {{0, {}, {}}, {1, {}, {}}};
    std::vector<std::vector<SparseRows>> split(3, all);
    for (uint64_t id = step; id < 40; id += 3) {
      for (int32_t t = 0; t < 2; ++t) {
        const int dim = t == 0 ? 2 : 3;
        all[t].ids.push_back(id);
        auto& part = split[ShardOfRow(t, id, 3)][t];
        part.ids.push_back(id);
        for (int k = 0; k < dim; ++k) {
          const float g = 0.01f * static_cast<float>(id + k + step);
          all[t].grads.push_back(g);
          part.grads.push_back(g);
        }
      }
    }
    ASSERT_TRUE(whole->ApplyStep({&all}, 2, step).ok());
    for (int k = 0; k < 3; ++k) {
      ASSERT_TRUE(shards[k]->ApplyStep({&split[k]}, 2, step).ok());
    }
  }
  for (int32_t t = 0; t < 2; ++t) {
    for (uint64_t id = 0; id < 45; ++id) {
      EXPECT_EQ(Read(*whole, t, {id}),
                Read(*shards[ShardOfRow(t, id, 3)], t, {id}))
          << "table " << t << " id " << id;
    }
  }
}

TEST(SparseStore, TtlDropsRowsUnseenForTtlSteps) {
  SparseStoreConfig c = Config();
  c.ttl_steps = 4;
  auto s = Make(c);
  const std::vector<SparseRows> old_row = {{0, {1}, {1, 1}}};
  ASSERT_TRUE(s->ApplyStep({&old_row}, 1, 0).ok());
  const std::vector<SparseRows> fresh = {{0, {2}, {1, 1}}};
  int64_t gone_at = -1;
  for (int step = 1; step < 10; ++step) {
    ASSERT_TRUE(s->ApplyStep({&fresh}, 1, step).ok());
    if (gone_at < 0 && !s->table(0).HasRow(1)) gone_at = step;
  }
  // Unseen since step 0: kept through step 4, gone by step 5 (scans every
  // ttl / 4 = 1 step).
  EXPECT_EQ(gone_at, 5);
  EXPECT_TRUE(s->table(0).HasRow(2));
  EXPECT_EQ(s->Stats().total.evicted_ttl, 1);
}

TEST(SparseStore, MemoryLimitEvictsTheLeastRecentlyUpdatedAcrossTables) {
  SparseStoreConfig c = Config();
  const int64_t row0 = 2 * 4 + 21, row1 = 3 * 4 + 21;  // per-row bytes
  c.max_bytes = 10 * row1;
  auto s = Make(c);
  for (int step = 0; step < 12; ++step) {
    const uint64_t id = 100 + step;
    const std::vector<SparseRows> rows = {
        {step % 2, {id}, std::vector<float>(step % 2 == 0 ? 2 : 3, 0.5f)}};
    ASSERT_TRUE(s->ApplyStep({&rows}, 1, step).ok());
    ASSERT_LE(s->Stats().bytes, c.max_bytes) << "step " << step;
  }
  const SparseStoreStats stats = s->Stats();
  EXPECT_GT(stats.total.evicted_memory, 0);
  // The newest rows are there, the oldest are not.
  EXPECT_TRUE(s->table(1).HasRow(111));
  EXPECT_TRUE(s->table(0).HasRow(110));
  EXPECT_FALSE(s->table(0).HasRow(100));
  EXPECT_FALSE(s->table(1).HasRow(101));
  EXPECT_EQ(stats.bytes, s->table(0).rows() * row0 + s->table(1).rows() * row1);
  // An evicted row reads as its initial value again.
  auto fresh = Make(Config());
  EXPECT_EQ(Read(*s, 0, {100}), Read(*fresh, 0, {100}));
}

}  // namespace
}  // namespace ferry

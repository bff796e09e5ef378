#include "ps/sparse_store.h"

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
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

// A store that went through every kind of event: admissions (every id is
// admitted on its second update), dropped updates, creations, TTL and
// memory evictions, pending counters, and rows over several storage blocks.
std::unique_ptr<SparseStore> Eventful(SparseStoreConfig& c) {
  c = Config();
  c.admit_count = 2;
  c.ttl_steps = 4;
  c.max_bytes = 40000 * (2 * 4 + 21) + 15000 * (3 * 4 + 21);
  auto s = Make(c);
  const auto add = [](std::vector<uint64_t>& ids, uint64_t first, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) ids.push_back(first + i);
  };
  // An id gets its row on its third update (counted, admitted, created).
  for (int step = 0; step < 12; ++step) {
    std::vector<SparseRows> rows(2);
    rows[0].table = 0;
    rows[1].table = 1;
    add(rows[0].ids, 0, 40000);  // every step: 3 blocks of rows
    std::vector<uint64_t>& ids1 = rows[1].ids;
    if (step <= 2) add(ids1, 0, 100);  // then unseen: evicted by TTL
    if (step >= 6 && step <= 8) add(ids1, 10000, 10000);
    if (step >= 8 && step <= 10) add(ids1, 20000, 10000);  // over max_bytes
    if (step == 11) add(ids1, 30000, 10000);               // stay pending
    rows[0].grads.assign(rows[0].ids.size() * 2, 0.25f);
    rows[1].grads.assign(rows[1].ids.size() * 3, -0.5f);
    EXPECT_TRUE(s->ApplyStep({&rows}, 1, step).ok());
  }
  return s;
}

TEST(SparseStore, RestoreKeepsRowsAdmissionAndEventCounters) {
  SparseStoreConfig c;
  auto s = Eventful(c);
  const SparseStoreStats before = s->Stats();
  ASSERT_GT(before.tables[0].rows, 2 * SparseTable::kBlockRows);
  ASSERT_GT(before.total.evicted_memory, 0);
  ASSERT_GT(before.total.evicted_ttl, 0);
  ASSERT_GT(before.total.updates_dropped, 0);
  ASSERT_GT(before.total.pending_ids, 0);
  const std::vector<TableCheckpoint> parts = s->Export();
  auto copy = Make(c);
  ASSERT_TRUE(copy->Restore(parts).ok());
  const SparseStoreStats after = copy->Stats();
  for (size_t t = 0; t < 2; ++t) {
    EXPECT_EQ(copy->table(t).counters(), s->table(t).counters()) << t;
    EXPECT_EQ(after.tables[t].rows, before.tables[t].rows);
    EXPECT_EQ(after.tables[t].pending_ids, before.tables[t].pending_ids);
  }
  EXPECT_EQ(after.total.rows_created, before.total.rows_created);
  EXPECT_EQ(after.total.evicted_memory, before.total.evicted_memory);
  // The same rows, state and counters: Export gives the same parts.
  const std::vector<TableCheckpoint> again = copy->Export();
  for (size_t t = 0; t < 2; ++t) {
    EXPECT_EQ(again[t].ids, parts[t].ids);
    EXPECT_EQ(again[t].last_seen, parts[t].last_seen);
    EXPECT_EQ(again[t].values, parts[t].values);
    EXPECT_EQ(again[t].counters, parts[t].counters);
  }
  // Counting goes on from there (a row on the third update).
  const std::vector<SparseRows> one = {{1, {77777777}, {1, 1, 1}}};
  for (int step = 12; step < 15; ++step) {
    ASSERT_TRUE(copy->ApplyStep({&one}, 1, step).ok());
  }
  EXPECT_EQ(copy->table(1).counters().rows_created,
            s->table(1).counters().rows_created + 1);
  // A checkpoint written before the counters were kept (format version 2)
  // restores its rows with the counters at zero.
  std::vector<TableCheckpoint> old = parts;
  for (TableCheckpoint& part : old) part.counters.reset();
  ASSERT_TRUE(copy->Restore(old).ok());
  EXPECT_EQ(copy->table(0).counters(), TableCounters{});
  EXPECT_EQ(copy->Stats().total.rows, before.total.rows);
}

TEST(SparseStore, CheckpointSourcesReadTheRowsInPlaceAsExportCopiesThem) {
  SparseStoreConfig c;
  auto s = Eventful(c);
  std::string copied, in_place;
  EncodeTables(s->Export(), copied);
  const std::vector<std::unique_ptr<TablePartSource>> sources =
      s->CheckpointSources();
  std::vector<const TablePartSource*> pointers;
  for (const auto& source : sources) pointers.push_back(source.get());
  ASSERT_TRUE(ValidateTableSources(pointers).ok());
  StringByteSink sink(&in_place);
  ASSERT_TRUE(WriteTables(pointers, /*with_counters=*/true, sink).ok());
  EXPECT_TRUE(in_place == copied);
  auto decoded = DecodeTables(in_place, /*with_counters=*/true);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  auto copy = Make(c);
  ASSERT_TRUE(copy->Restore(*decoded).ok());
  EXPECT_EQ(copy->table(1).counters(), s->table(1).counters());
}

TEST(SparseStore, RestoreInPlaceReadsEveryRowOnceAndHandsItsBytesOver) {
  SparseStoreConfig c;
  auto s = Eventful(c);
  std::string section;
  EncodeTables(s->Export(), section);
  auto views = DecodeTableViews(section, /*with_counters=*/true);
  ASSERT_TRUE(views.ok()) << views.status();
  int64_t handed = 0;
  auto copy = Make(c);
  ASSERT_TRUE(copy->Restore(*views,
                            [&](absl::string_view part) {
                              EXPECT_GE(part.data(), section.data());
                              EXPECT_LE(part.data() + part.size(),
                                        section.data() + section.size());
                              handed += static_cast<int64_t>(part.size());
                            })
                  .ok());
  // Every row's id, last-seen step and floats, and every pending counter's
  // id, count and step, once.
  int64_t column_bytes = 0;
  for (const TableCheckpointView& t : *views) {
    column_bytes +=
        static_cast<int64_t>(t.ids.size()) * (16 + 4 * t.row_floats) +
        static_cast<int64_t>(t.pending_ids.size()) * 20;
  }
  ASSERT_GT((*views)[0].pending_ids.size() + (*views)[1].pending_ids.size(),
            0u);
  EXPECT_EQ(handed, column_bytes);
  // The same rows in the same order, the same counters (pending counters
  // come out in the hash map's order).
  const auto same_rows = [&](const SparseStore& a, const SparseStore& b) {
    const std::vector<TableCheckpoint> x = a.Export(), y = b.Export();
    for (size_t t = 0; t < x.size(); ++t) {
      EXPECT_EQ(x[t].ids, y[t].ids) << t;
      EXPECT_EQ(x[t].last_seen, y[t].last_seen) << t;
      EXPECT_EQ(x[t].values, y[t].values) << t;
      EXPECT_EQ(x[t].pending_ids.size(), y[t].pending_ids.size()) << t;
      EXPECT_EQ(x[t].counters, y[t].counters) << t;
    }
  };
  same_rows(*copy, *s);
  // A part whose columns disagree is refused and changes nothing.
  std::vector<TableCheckpointView> bad = *views;
  bad[0].last_seen = PackedColumn<int64_t>(bad[0].last_seen.bytes(0, 0).data(),
                                           bad[0].last_seen.size() - 1);
  const absl::Status refused = copy->Restore(bad, nullptr);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  same_rows(*copy, *s);
}

TEST(SparseStore, RestoreInPlaceRefusesARowOfALaterBatchAndChangesNothing) {
  // Shard 0 of 2 with one row, then a part of 40,000 rows of shard 0 whose
  // last id belongs to shard 1 (past the first insertion batches).
  SparseStoreConfig config;
  config.dims = {2};
  config.shard_id = 0;
  config.num_shards = 2;
  auto store = *SparseStore::Create(config);
  TableCheckpoint part;
  part.table = 0;
  part.row_floats = 3;  // dim 2 + row-wise Adagrad's accumulator
  for (uint64_t id = 0; part.ids.size() < 40000; ++id) {
    if (ShardOfRow(0, id, 2) == 0) part.ids.push_back(id);
  }
  uint64_t foreign = 0;
  while (ShardOfRow(0, foreign, 2) == 0) ++foreign;
  part.ids.back() = foreign;
  part.last_seen.assign(part.ids.size(), 1);
  part.values.assign(part.ids.size() * 3, 0.5f);
  const TableCheckpointView view = TableCheckpointView::Of(part);
  const absl::Status refused = store->Restore({&view, 1}, nullptr);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("belongs on shard 1"));
  EXPECT_EQ(store->Stats().total.rows, 0);
  part.ids.back() = part.ids.front();  // now a repeated id
  const TableCheckpointView repeated = TableCheckpointView::Of(part);
  EXPECT_EQ(store->Restore({&repeated, 1}, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Stats().total.rows, 0);
}

TEST(SparseStore, RestoreOfPlacedRowsSplitsAWholeStoreOverShards) {
  SparseStoreConfig c;
  auto whole = Eventful(c);  // one shard: every row
  std::vector<TableCheckpointView> views;
  const std::vector<TableCheckpoint> parts = whole->Export();
  for (const TableCheckpoint& part : parts) {
    views.push_back(TableCheckpointView::Of(part));
  }
  int64_t rows = 0, pending = 0;
  for (int32_t shard = 0; shard < 2; ++shard) {
    SparseStoreConfig placed = c;
    placed.shard_id = shard;
    placed.num_shards = 2;
    auto store = Make(placed);
    ASSERT_TRUE(store->Restore(views, nullptr, {TableScope::kPlacedHere}).ok());
    // Exactly the rows ShardOfRow places here, with their values.
    for (const TableCheckpoint& part : store->Export()) {
      for (uint64_t id : part.ids) {
        EXPECT_EQ(ShardOfRow(part.table, id, 2), shard);
        EXPECT_TRUE(whole->table(part.table).HasRow(id));
      }
      for (uint64_t id : part.pending_ids) {
        EXPECT_EQ(ShardOfRow(part.table, id, 2), shard);
      }
    }
    const SparseStoreStats stats = store->Stats();
    rows += stats.total.rows;
    pending += stats.total.pending_ids;
    EXPECT_EQ(stats.total.rows_created, 0);  // the whole's, not counted here
    // kAll refuses the rows of the other shard.
    EXPECT_EQ(store->Restore(views, nullptr).code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(rows, whole->Stats().total.rows);
  EXPECT_EQ(pending, whole->Stats().total.pending_ids);
}

TEST(SparseStore, UndoPutsEveryUpdatedTableBack) {
  auto s = Make(Config());
  const std::vector<SparseRows> a = {{0, {1, 2}, {1, 2, 3, 4}}};
  ASSERT_TRUE(s->ApplyStep({&a}, 1, 0).ok());
  const std::vector<TableCheckpoint> before = s->Export();
  const std::vector<SparseRows> b = {{0, {2, 3}, {1, 1, 1, 1}},
                                     {1, {7}, {1, 1, 1}}};
  SparseStepUndo undo;
  ASSERT_TRUE(s->ApplyStep({&b}, 2, 1, &undo).ok());
  EXPECT_EQ(undo.tables, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(s->Stats().total.rows, 4);
  s->Undo(undo);
  const std::vector<TableCheckpoint> after = s->Export();
  ASSERT_EQ(after.size(), before.size());
  for (size_t t = 0; t < after.size(); ++t) {
    EXPECT_EQ(after[t].ids, before[t].ids) << t;
    EXPECT_EQ(after[t].values, before[t].values) << t;
    EXPECT_EQ(after[t].last_seen, before[t].last_seen) << t;
    EXPECT_EQ(after[t].counters, before[t].counters) << t;
  }
  // A store whose limits evict rows cannot record its steps.
  SparseStoreConfig c = Config();
  c.ttl_steps = 10;
  auto limited = Make(c);
  EXPECT_EQ(limited->ApplyStep({&a}, 1, 0, &undo).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(limited->Stats().total.rows, 0);
}

}  // namespace
}  // namespace ferry

#include "ps/sparse_table.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

SparseTableConfig Config(RowOptimizerKind kind = RowOptimizerKind::kSgd,
                         int dim = 4, int admit = 1) {
  SparseTableConfig c;
  c.table = 3;
  c.dim = dim;
  c.optimizer.kind = kind;
  c.optimizer.lr = 0.5f;
  c.seed = 11;
  c.init_scale = 0.1f;
  c.admit_count = admit;
  return c;
}

std::unique_ptr<SparseTable> Make(const SparseTableConfig& c) {
  auto t = SparseTable::Create(c);
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

std::vector<float> Read(const SparseTable& t, std::vector<uint64_t> ids) {
  std::vector<float> out(ids.size() * t.dim(), -7.0f);
  EXPECT_TRUE(t.Read(ids, absl::MakeSpan(out)).ok());
  return out;
}

std::vector<float> Init(const SparseTableConfig& c, uint64_t id) {
  std::vector<float> row(c.dim + RowStateFloats(c.optimizer.kind, c.dim));
  InitRow(row.data(), c.seed, c.table, id, c.dim, c.init_scale, c.optimizer);
  row.resize(c.dim);
  return row;
}

// Everything a table stores, for "nothing changed" checks.
struct Dump {
  std::map<uint64_t, std::pair<int64_t, std::vector<float>>> rows;
  std::map<uint64_t, std::pair<int32_t, int64_t>> pending;
  bool operator==(const Dump& o) const {
    return rows == o.rows && pending == o.pending;
  }
};
Dump DumpOf(const SparseTable& t) {
  Dump d;
  t.ForEachRow([&](uint64_t id, int64_t seen, absl::Span<const float> row) {
    d.rows[id] = {seen, std::vector<float>(row.begin(), row.end())};
  });
  t.ForEachPending([&](uint64_t id, int32_t count, int64_t seen) {
    d.pending[id] = {count, seen};
  });
  return d;
}

TEST(SparseTable, RejectsBadConfigs) {
  SparseTableConfig c = Config();
  c.dim = 0;
  EXPECT_THAT(SparseTable::Create(c).status().message(), HasSubstr("dim 0"));
  c = Config();
  c.table = -1;
  EXPECT_FALSE(SparseTable::Create(c).ok());
  c = Config();
  c.optimizer.lr = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THAT(SparseTable::Create(c).status().message(), HasSubstr("lr"));
  c = Config();
  c.optimizer.l1 = -1.0f;
  EXPECT_THAT(SparseTable::Create(c).status().message(), HasSubstr("l1"));
  c = Config();
  c.init_scale = -0.1f;
  EXPECT_FALSE(SparseTable::Create(c).ok());
}

TEST(SparseTable, ParsesOptimizerNames) {
  for (RowOptimizerKind k : {RowOptimizerKind::kSgd, RowOptimizerKind::kAdagrad,
                             RowOptimizerKind::kFtrl}) {
    EXPECT_EQ(*ParseRowOptimizerKind(RowOptimizerKindName(k)), k);
  }
  EXPECT_THAT(ParseRowOptimizerKind("adam").status().message(),
              HasSubstr("sgd, adagrad, ftrl"));
}

TEST(SparseTable, UnseenIdsReadAsTheirInitialValuesAndStoreNothing) {
  const SparseTableConfig c = Config();
  auto t = Make(c);
  const std::vector<float> out = Read(*t, {5, 9, 5});
  const std::vector<float> five = Init(c, 5), nine = Init(c, 9);
  EXPECT_EQ(std::vector<float>(out.begin(), out.begin() + 4), five);
  EXPECT_EQ(std::vector<float>(out.begin() + 4, out.begin() + 8), nine);
  EXPECT_EQ(std::vector<float>(out.begin() + 8, out.end()), five);
  EXPECT_NE(five, nine);
  for (float v : five) EXPECT_LE(std::fabs(v), 0.1f);
  EXPECT_EQ(t->rows(), 0);
}

TEST(SparseTable, DefaultInitScaleIsOneOverSqrtDim) {
  SparseTableConfig c = Config(RowOptimizerKind::kSgd, 16);
  c.init_scale = 0.0f;
  auto t = Make(c);
  EXPECT_FLOAT_EQ(t->config().init_scale, 0.25f);
}

TEST(SparseTable, ApplyCreatesAndUpdatesRows) {
  const SparseTableConfig c = Config();
  auto t = Make(c);
  const std::vector<float> g = {1, 2, 3, 4, -1, -1, -1, -1};
  ASSERT_TRUE(t->Apply({7, 8}, g, 10).ok());
  EXPECT_EQ(t->rows(), 2);
  const std::vector<float> out = Read(*t, {7, 8});
  const std::vector<float> seven = Init(c, 7), eight = Init(c, 8);
  for (int k = 0; k < 4; ++k) {
    EXPECT_FLOAT_EQ(out[k], seven[k] - 0.5f * g[k]);
    EXPECT_FLOAT_EQ(out[4 + k], eight[k] + 0.5f);
  }
  ASSERT_TRUE(t->Apply({7}, {1, 1, 1, 1}, 11).ok());
  EXPECT_FLOAT_EQ(Read(*t, {7})[0], seven[0] - 0.5f * 1 - 0.5f);
  const Dump d = DumpOf(*t);
  EXPECT_EQ(d.rows.at(7).first, 11);
  EXPECT_EQ(d.rows.at(8).first, 10);
  const SparseTableStats s = t->Stats();
  EXPECT_EQ(s.rows, 2);
  EXPECT_EQ(s.rows_created, 2);
  EXPECT_EQ(s.row_bytes, 2 * 16);
}

TEST(SparseTable, EachOptimizerMatchesItsRowMath) {
  for (RowOptimizerKind kind :
       {RowOptimizerKind::kAdagrad, RowOptimizerKind::kFtrl}) {
    SparseTableConfig c = Config(kind, 3);
    c.optimizer.l2 = 0.1f;
    auto t = Make(c);
    std::vector<float> row(3 + RowStateFloats(kind, 3));
    InitRow(row.data(), c.seed, c.table, 42, 3, c.init_scale, c.optimizer);
    for (int step = 0; step < 5; ++step) {
      const std::vector<float> g = {0.1f * step, -0.2f, 0.3f};
      ApplyRowUpdate(row.data(), g.data(), 3, c.optimizer);
      ASSERT_TRUE(t->Apply({42}, g, step).ok());
    }
    const Dump d = DumpOf(*t);
    EXPECT_EQ(d.rows.at(42).second, row) << RowOptimizerKindName(kind);
    EXPECT_EQ(t->RowFloats(), static_cast<int>(row.size()));
  }
}

TEST(SparseTable, RejectedUpdatesChangeNothing) {
  auto t = Make(Config(RowOptimizerKind::kAdagrad, 2, 2));
  ASSERT_TRUE(t->Apply({1, 2}, {1, 1, 1, 1}, 0).ok());  // counted
  ASSERT_TRUE(t->Apply({1, 3}, {1, 1, 1, 1}, 1).ok());  // 1 admitted
  ASSERT_TRUE(t->Apply({1}, {1, 1}, 2).ok());           // 1 created
  const Dump before = DumpOf(*t);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  absl::Status s = t->Apply({1, 4, 1}, {1, 1, 2, 2, 3, 3}, 3);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(s.message(), HasSubstr("id 1 appears twice"));
  s = t->Apply({4, 1}, {1, 1, 0, nan}, 3);
  EXPECT_THAT(s.message(), HasSubstr("non-finite gradient for id 1"));
  s = t->Apply({4, 1}, {1, 1, 0}, 3);
  EXPECT_THAT(s.message(), HasSubstr("2 ids with 3 gradient floats"));
  std::vector<float> out(3);
  EXPECT_FALSE(t->Read({1, 2}, absl::MakeSpan(out)).ok());
  EXPECT_EQ(DumpOf(*t), before);
}

TEST(SparseTable, AdmissionCountsUpdatesBeforeCreatingARow) {
  const SparseTableConfig c = Config(RowOptimizerKind::kSgd, 2, 3);
  auto t = Make(c);
  const std::vector<float> zeros = {0, 0};
  EXPECT_EQ(Read(*t, {5}), zeros);
  ASSERT_TRUE(t->Apply({5}, {1, 1}, 0).ok());
  ASSERT_TRUE(t->Apply({5}, {1, 1}, 1).ok());
  EXPECT_EQ(Read(*t, {5}), zeros);  // seen twice of three
  EXPECT_EQ(t->rows(), 0);
  EXPECT_EQ(t->Stats().pending_ids, 1);
  ASSERT_TRUE(t->Apply({5}, {1, 1}, 2).ok());  // admitted: no row yet
  EXPECT_EQ(t->rows(), 0);
  EXPECT_EQ(Read(*t, {5}), Init(c, 5));  // reads as its initial values now
  ASSERT_TRUE(t->Apply({5}, {1, 1}, 3).ok());  // created and updated
  EXPECT_EQ(t->rows(), 1);
  EXPECT_FLOAT_EQ(Read(*t, {5})[0], Init(c, 5)[0] - 0.5f);
  const SparseTableStats s = t->Stats();
  EXPECT_EQ(s.pending_ids, 0);
  EXPECT_EQ(s.ids_admitted, 1);
  EXPECT_EQ(s.updates_dropped, 3);
  EXPECT_EQ(s.rows_created, 1);
}

TEST(SparseTable, TtlEvictsRowsAndCountersUnseenSinceAStep) {
  auto t = Make(Config(RowOptimizerKind::kSgd, 2, 2));
  ASSERT_TRUE(t->Apply({1}, {0, 0}, 0).ok());
  ASSERT_TRUE(t->Apply({1, 2}, {0, 0, 0, 0}, 1).ok());
  ASSERT_TRUE(t->Apply({1, 3}, {0, 0, 0, 0}, 5).ok());  // 1 has a row
  ASSERT_TRUE(t->Apply({3}, {0, 0}, 6).ok());           // 3 admitted
  EXPECT_EQ(t->rows(), 1);
  EXPECT_EQ(t->EvictUnseenSince(5), 0);  // row 1 seen at 5; counter 2 goes
  EXPECT_EQ(t->Stats().pending_ids, 1);
  EXPECT_EQ(t->EvictUnseenSince(6), 1);  // row 1 goes, counter 3 stays
  EXPECT_EQ(t->rows(), 0);
  const std::vector<float> zeros = {0, 0};
  EXPECT_EQ(Read(*t, {1}), zeros);  // evicted: counted again from zero
  EXPECT_NE(Read(*t, {3}), zeros);  // still admitted
  EXPECT_EQ(t->Stats().evicted_ttl, 1);
}

TEST(SparseTable, EvictOldestDropsTheLeastRecentlySeen) {
  auto t = Make(Config(RowOptimizerKind::kSgd, 1));
  for (int step = 0; step < 10; ++step) {
    ASSERT_TRUE(t->Apply({static_cast<uint64_t>(100 + step)}, {0}, step).ok());
  }
  ASSERT_TRUE(t->Apply({100}, {0}, 10).ok());  // 100 is recent again
  EXPECT_EQ(t->EvictOldest(3), 3);             // 101, 102, 103
  for (uint64_t id : {101, 102, 103}) EXPECT_FALSE(t->HasRow(id)) << id;
  for (uint64_t id : {100, 104, 109}) EXPECT_TRUE(t->HasRow(id)) << id;
  EXPECT_EQ(t->EvictOldest(100), 7);
  EXPECT_EQ(t->rows(), 0);
  EXPECT_EQ(t->Stats().evicted_memory, 10);
  EXPECT_EQ(t->EvictOldest(1), 0);
}

TEST(SparseTable, ManyRowsAcrossBlocksSurviveRemovals) {
  const SparseTableConfig c = Config(RowOptimizerKind::kSgd, 2);
  auto t = Make(c);
  const int n = SparseTable::kBlockRows * 2 + 17;
  std::vector<uint64_t> ids(n);
  std::vector<float> grads(2 * n);
  for (int i = 0; i < n; ++i) {
    ids[i] = static_cast<uint64_t>(i) * 7919;
    grads[2 * i] = static_cast<float>(i);
    grads[2 * i + 1] = 1.0f;
  }
  ASSERT_TRUE(t->Apply(ids, grads, 0).ok());
  // Touch the odd ones again, then evict the rest.
  std::vector<uint64_t> odd;
  for (int i = 1; i < n; i += 2) odd.push_back(ids[i]);
  ASSERT_TRUE(t->Apply(odd, std::vector<float>(2 * odd.size(), 0.0f), 1).ok());
  EXPECT_EQ(t->EvictUnseenSince(1), (n + 1) / 2);
  EXPECT_EQ(t->rows(), static_cast<int64_t>(odd.size()));
  const std::vector<float> out = Read(*t, odd);
  for (size_t j = 0; j < odd.size(); ++j) {
    const int i = static_cast<int>(2 * j + 1);
    EXPECT_FLOAT_EQ(out[2 * j], Init(c, ids[i])[0] - 0.5f * i) << i;
  }
  for (int i = 0; i < n; i += 2) ASSERT_FALSE(t->HasRow(ids[i])) << i;
}

TEST(SparseTable, CheckpointRoundTrip) {
  const SparseTableConfig c = Config(RowOptimizerKind::kFtrl, 2, 2);
  auto t = Make(c);
  ASSERT_TRUE(t->Apply({1, 2}, {1, 2, 3, 4}, 0).ok());
  ASSERT_TRUE(t->Apply({1, 3}, {1, 2, 3, 4}, 1).ok());
  ASSERT_TRUE(t->Apply({1, 3}, {1, 2, 3, 4}, 2).ok());
  auto copy = Make(c);
  absl::Status status;
  t->ForEachRow([&](uint64_t id, int64_t seen, absl::Span<const float> row) {
    status.Update(copy->InsertRow(id, seen, row));
  });
  t->ForEachPending([&](uint64_t id, int32_t count, int64_t seen) {
    status.Update(copy->InsertPending(id, count, seen));
  });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(DumpOf(*copy), DumpOf(*t));
  EXPECT_EQ(Read(*copy, {1, 2, 3, 4}), Read(*t, {1, 2, 3, 4}));
  // Bad restores are refused.
  const std::vector<float> row(c.dim + RowStateFloats(c.optimizer.kind, c.dim));
  EXPECT_THAT(copy->InsertRow(1, 0, row).message(), HasSubstr("already"));
  EXPECT_FALSE(copy->InsertRow(9, 0, {1.0f}).ok());
  std::vector<float> bad = row;
  bad[0] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(copy->InsertRow(9, 0, bad).ok());
  EXPECT_FALSE(copy->InsertPending(9, 0, 0).ok());
  EXPECT_FALSE(copy->InsertPending(9, 3, 0).ok());
  EXPECT_FALSE(copy->InsertPending(1, 1, 0).ok());  // has a row
}

TEST(SparseTable, UndoPutsBackRowsCountersAndStatsNewestFirst) {
  // Adagrad (optimizer state in the row) and admission at the second use,
  // so that an update may create a row, count an id or admit one.
  auto t = Make(Config(RowOptimizerKind::kAdagrad, 2, /*admit=*/2));
  // An id is admitted by its second update and gets its row at the next.
  ASSERT_TRUE(t->Apply({1, 2}, {1, 1, 1, 1}, 0).ok());  // 1, 2 counted
  ASSERT_TRUE(t->Apply({1, 3}, {2, 2, 2, 2}, 1).ok());  // 1 admitted
  std::vector<Dump> before;
  std::vector<TableCounters> counters;
  std::vector<TableUndo> undos(3);
  const std::vector<std::vector<uint64_t>> steps = {
      {1, 2, 4},   // 1's row created, 2 admitted, 4 counted
      {2, 4, 5},   // 2's row created, 4 admitted, 5 counted
      {1, 5, 6}};  // 1 updated, 5 admitted, 6 counted
  for (size_t i = 0; i < steps.size(); ++i) {
    before.push_back(DumpOf(*t));
    counters.push_back(t->counters());
    std::vector<float> g(steps[i].size() * 2, 0.25f * (i + 1));
    ASSERT_TRUE(t->Apply(steps[i], g, 2 + i, &undos[i]).ok());
  }
  EXPECT_EQ(t->rows(), 2);         // 1 and 2
  EXPECT_EQ(t->pending_ids(), 4);  // 3, 4, 5, 6
  for (size_t i = steps.size(); i-- > 0;) {
    t->Undo(undos[i]);
    EXPECT_EQ(DumpOf(*t), before[i]) << "after undoing step " << i;
    EXPECT_EQ(t->counters(), counters[i]) << "after undoing step " << i;
    EXPECT_EQ(t->rows(), static_cast<int64_t>(before[i].rows.size()));
  }
  // The table works on as if the undone steps never ran.
  ASSERT_TRUE(t->Apply({1, 2, 4}, std::vector<float>(6, 0.25f), 2).ok());
  t->Undo(undos[0]);
  EXPECT_EQ(DumpOf(*t), before[0]);
}

TEST(SparseTable, AFailedApplyWritesNoUndo) {
  auto t = Make(Config());
  TableUndo undo;
  undo.entries.push_back({.id = 99});
  EXPECT_FALSE(t->Apply({1, 1}, std::vector<float>(8, 1.0f), 0, &undo).ok());
  ASSERT_EQ(undo.entries.size(), 1u);
  EXPECT_EQ(undo.entries[0].id, 99u);
}

}  // namespace
}  // namespace ferry

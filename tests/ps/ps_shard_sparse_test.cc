// PsShard with embedding tables: row gradients pushed beside the chunks,
// applied with the step (sync, on finalize or on push) or on arrival
// (async), read back with ReadRows; bad rows refused without a change.
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/file_system.h"
#include "common/sharding.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps/ps_checkpointer.h"
#include "ps/ps_shard.h"
#include "ps_shard_testing.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

constexpr int kDim = 2;

PsShardConfig SparseConfig(PsConsistency consistency = PsConsistency::kSync) {
  PsShardConfig config = TestConfig(consistency);
  SparseStoreConfig sparse;
  sparse.dims = {kDim, kDim};
  sparse.optimizer.kind = RowOptimizerKind::kSgd;
  sparse.optimizer.lr = 1.0f;
  sparse.seed = 3;
  sparse.init_scale = 0.1f;
  config.sparse = sparse;
  return config;
}

// Ids of `table` placed on this test's shard (kShard of 2), or on the other.
std::vector<uint64_t> Ids(int32_t table, int n, bool mine = true) {
  std::vector<uint64_t> ids;
  for (uint64_t id = 1; static_cast<int>(ids.size()) < n; ++id) {
    if ((ShardOfRow(table, id, 2) == kShard) == mine) ids.push_back(id);
  }
  return ids;
}

// A push of the slice gradient `g` plus `rows`.
absl::StatusOr<int64_t> Push(PsShard& shard, const PsPushHeader& header,
                             const std::vector<float>& g,
                             std::vector<SparseRows> rows) {
  return PushSlice(shard, header, g, std::move(rows));
}

std::vector<float> Rows(PsShard& shard, int32_t table,
                        const std::vector<uint64_t>& ids) {
  std::vector<std::vector<float>> out;
  const PsShard::RowsToRead part{table, ids};
  auto version = shard.ReadRows("job", absl::MakeConstSpan(&part, 1), out);
  EXPECT_TRUE(version.ok()) << version.status();
  return out.empty() ? std::vector<float>{} : out[0];
}

const std::vector<float> kZeroSlice = {0, 0, 0, 0};

TEST(PsShardSparse, SyncStepAppliesTheContributorsMeanRows) {
  auto shard = MakeShard(SparseConfig());
  const std::vector<uint64_t> ids = Ids(0, 2);
  const std::vector<float> before = Rows(*shard, 0, ids);
  ASSERT_TRUE(
      Push(*shard, Header("a", 0, 1), kZeroSlice, {{0, {ids[0]}, {1, 2}}})
          .ok());
  ASSERT_TRUE(Push(*shard, Header("b", 0, 3), kZeroSlice,
                   {{0, {ids[0], ids[1]}, {3, 2, 8, 8}}})
                  .ok());
  EXPECT_EQ(Rows(*shard, 0, ids), before);  // not applied before finalize
  const std::vector<PsContributor> set = {{"a", 1}, {"b", 3}};
  ASSERT_TRUE(shard->FinalizeStep("job", 0, set, 0).ok());
  const std::vector<float> after = Rows(*shard, 0, ids);
  EXPECT_FLOAT_EQ(after[0], before[0] - 4.0f / 4);
  EXPECT_FLOAT_EQ(after[1], before[1] - 4.0f / 4);
  EXPECT_FLOAT_EQ(after[2], before[2] - 8.0f / 4);
  EXPECT_FLOAT_EQ(after[3], before[3] - 8.0f / 4);
  const PsShardInfo info = shard->Info();
  ASSERT_TRUE(info.sparse.has_value());
  EXPECT_EQ(info.sparse->total.rows, 2);
}

TEST(PsShardSparse, AQuorumAppliesOnlyItsContributorsRows) {
  auto shard = MakeShard(SparseConfig());
  const std::vector<uint64_t> ids = Ids(1, 1);
  const std::vector<float> before = Rows(*shard, 1, ids);
  ASSERT_TRUE(
      Push(*shard, Header("a", 0, 2), kZeroSlice, {{1, ids, {2, 2}}}).ok());
  ASSERT_TRUE(
      Push(*shard, Header("b", 0, 2), kZeroSlice, {{1, ids, {100, 100}}}).ok());
  const std::vector<PsContributor> set = {{"a", 2}};
  ASSERT_TRUE(shard->FinalizeStep("job", 0, set, 0).ok());
  EXPECT_FLOAT_EQ(Rows(*shard, 1, ids)[0], before[0] - 1.0f);
  // The dropped push's rows are gone with the step.
  const std::vector<PsContributor> next = {{"a", 2}};
  ASSERT_TRUE(Push(*shard, Header("a", 1, 2), kZeroSlice, {}).ok());
  ASSERT_TRUE(shard->FinalizeStep("job", 1, next, 0).ok());
  EXPECT_FLOAT_EQ(Rows(*shard, 1, ids)[0], before[0] - 1.0f);
}

TEST(PsShardSparse, FinalizeOnPushAppliesRowsWithTheStep) {
  auto shard = MakeShard(SparseConfig());
  const std::vector<uint64_t> ids = Ids(0, 1);
  const std::vector<float> before = Rows(*shard, 0, ids);
  const std::vector<PsContributor> set = {{"a", 1}, {"b", 1}};
  PsPushHeader a = Header("a", 0, 1), b = Header("b", 0, 1);
  a.step_contributors = b.step_contributors = set;
  ASSERT_TRUE(Push(*shard, a, kZeroSlice, {{0, ids, {2, 4}}}).ok());
  auto version = Push(*shard, b, kZeroSlice, {});
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, 1);
  const std::vector<float> after = Rows(*shard, 0, ids);
  EXPECT_FLOAT_EQ(after[0], before[0] - 1.0f);
  EXPECT_FLOAT_EQ(after[1], before[1] - 2.0f);
}

TEST(PsShardSparse, AsyncPushesApplyRowsOnArrival) {
  auto shard = MakeShard(SparseConfig(PsConsistency::kAsync));
  const std::vector<uint64_t> ids = Ids(0, 1);
  const std::vector<float> before = Rows(*shard, 0, ids);
  ASSERT_TRUE(
      Push(*shard, Header("a", 0, 2), kZeroSlice, {{0, ids, {2, 2}}}).ok());
  EXPECT_FLOAT_EQ(Rows(*shard, 0, ids)[0], before[0] - 1.0f);
  ASSERT_TRUE(
      Push(*shard, Header("b", 0, 1), kZeroSlice, {{0, ids, {1, 1}}}).ok());
  EXPECT_FLOAT_EQ(Rows(*shard, 0, ids)[0], before[0] - 2.0f);
  EXPECT_EQ(shard->version(), 2);
}

// With the job's global batch known, a push's row sums are divided by it,
// as a sync step over the whole batch would divide them.
TEST(PsShardSparse, AsyncRowsAreMeansOverTheGlobalBatch) {
  PsShardConfig config = SparseConfig(PsConsistency::kAsync);
  config.global_batch = 4;
  auto shard = MakeShard(config);
  const std::vector<uint64_t> ids = Ids(0, 1);
  const std::vector<float> before = Rows(*shard, 0, ids);
  ASSERT_TRUE(
      Push(*shard, Header("a", 0, 2), kZeroSlice, {{0, ids, {2, 2}}}).ok());
  EXPECT_FLOAT_EQ(Rows(*shard, 0, ids)[0], before[0] - 0.5f);
}

TEST(PsShardSparse, BadRowsRejectThePushAndChangeNothing) {
  auto shard = MakeShard(SparseConfig());
  const std::vector<uint64_t> mine = Ids(0, 1), theirs = Ids(0, 1, false);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    std::vector<SparseRows> rows;
    std::string error;
  };
  const std::vector<Case> cases = {
      {{{7, mine, {1, 1}}}, "embedding table 7 does not exist"},
      {{{0, theirs, {1, 1}}}, "belongs on shard 0, not shard 1"},
      {{{0, mine, {1, nan}}}, "non-finite gradient"},
      {{{0, mine, {1}}}, "1 ids with 1 gradient floats"},
      {{{0, mine, {1, 1}}, {0, mine, {1, 1}}}, "table 0 appears twice"},
  };
  int64_t rejected = 0;
  for (const Case& c : cases) {
    const absl::StatusOr<int64_t> pushed =
        Push(*shard, Header("a", 0, 1), kZeroSlice, c.rows);
    EXPECT_TRUE(absl::IsInvalidArgument(pushed.status())) << pushed.status();
    EXPECT_THAT(pushed.status().message(), HasSubstr(c.error));
    EXPECT_EQ(shard->Info().rejected_pushes, ++rejected);
  }
  // No push was kept: the worker may push step 0 again.
  ASSERT_TRUE(
      Push(*shard, Header("a", 0, 1), kZeroSlice, {{0, mine, {1, 1}}}).ok());
  EXPECT_EQ(shard->Info().sparse->total.rows, 0);
}

TEST(PsShardSparse, JobsWithoutTablesRefuseRows) {
  auto shard = MakeShard(TestConfig());
  auto pushed = Push(*shard, Header("a", 0, 1), kZeroSlice, {{0, {1}, {1}}});
  EXPECT_THAT(pushed.status().message(), HasSubstr("has no embedding tables"));
  std::vector<std::vector<float>> out;
  const std::vector<uint64_t> ids = {1};
  const PsShard::RowsToRead part{0, ids};
  EXPECT_TRUE(absl::IsFailedPrecondition(
      shard->ReadRows("job", absl::MakeConstSpan(&part, 1), out).status()));
  EXPECT_FALSE(shard->Info().sparse.has_value());
}

TEST(PsShardSparse, ReadRowsNamesWhatIsWrong) {
  auto shard = MakeShard(SparseConfig());
  std::vector<std::vector<float>> out;
  const std::vector<uint64_t> theirs = Ids(0, 1, false);
  PsShard::RowsToRead part{0, theirs};
  EXPECT_THAT(shard->ReadRows("job", absl::MakeConstSpan(&part, 1), out)
                  .status()
                  .message(),
              HasSubstr("belongs on shard 0"));
  part.table = 2;
  EXPECT_THAT(shard->ReadRows("job", absl::MakeConstSpan(&part, 1), out)
                  .status()
                  .message(),
              HasSubstr("table 2 does not exist"));
  EXPECT_TRUE(absl::IsFailedPrecondition(
      shard->ReadRows("other", absl::MakeConstSpan(&part, 1), out).status()));
  // Reads of unseen rows give their initial values and store nothing.
  const std::vector<uint64_t> mine = Ids(1, 3);
  part = {1, mine};
  auto version = shard->ReadRows("job", absl::MakeConstSpan(&part, 1), out);
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(*version, 0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].size(), 3u * kDim);
  EXPECT_NE(out[0][0], 0.0f);
  EXPECT_EQ(shard->Info().sparse->total.rows, 0);
}

// A sync step with rows of both tables from one worker.
void Step(PsShard& shard, int64_t step, const std::vector<uint64_t>& ids0,
          const std::vector<uint64_t>& ids1) {
  PsPushHeader h = Header("a", step, 1);
  h.step_contributors = {{"a", 1}};
  std::vector<float> g0(ids0.size() * kDim), g1(ids1.size() * kDim);
  for (size_t i = 0; i < g0.size(); ++i) g0[i] = 0.1f * (i + 1 + step);
  for (size_t i = 0; i < g1.size(); ++i) g1[i] = -0.2f * (i + 1);
  ASSERT_TRUE(Push(shard, h, kZeroSlice, {{0, ids0, g0}, {1, ids1, g1}}).ok());
}

TEST(PsShardSparse, ExportAndRestoreCarryRowsAndCounters) {
  PsShardConfig config = SparseConfig();
  config.sparse->admit_count = 2;
  auto shard = MakeShard(config);
  const std::vector<uint64_t> ids0 = Ids(0, 3), ids1 = Ids(1, 2);
  for (int64_t step = 0; step < 3; ++step) {
    Step(*shard, step, step == 0 ? std::vector<uint64_t>{ids0[0]} : ids0, ids1);
  }
  auto exported = shard->ExportState();
  ASSERT_TRUE(exported.ok()) << exported.status();
  ASSERT_EQ(exported->tables.size(), 2u);
  const std::vector<float> rows0 = Rows(*shard, 0, ids0),
                           rows1 = Rows(*shard, 1, ids1);
  // Another shard of the same job restores the rows and counters.
  auto copy = MakeShard(config);
  ASSERT_TRUE(copy->RestoreState(*exported, 0).ok());
  EXPECT_EQ(Rows(*copy, 0, ids0), rows0);
  EXPECT_EQ(Rows(*copy, 1, ids1), rows1);
  EXPECT_EQ(copy->Info().sparse->total.rows, shard->Info().sparse->total.rows);
  EXPECT_EQ(copy->Info().sparse->total.pending_ids,
            shard->Info().sparse->total.pending_ids);
  // A step later, restoring the export brings the rows back.
  Step(*shard, 3, ids0, ids1);
  EXPECT_NE(Rows(*shard, 0, ids0), rows0);
  ASSERT_TRUE(shard->RestoreState(*exported, 0).ok());
  EXPECT_EQ(Rows(*shard, 0, ids0), rows0);
  EXPECT_EQ(shard->version(), 3);
}

TEST(PsShardSparse, RestoreOfOtherTablesChangesNothing) {
  auto shard = MakeShard(SparseConfig());
  const std::vector<uint64_t> ids0 = Ids(0, 2), ids1 = Ids(1, 2);
  Step(*shard, 0, ids0, ids1);
  auto good = shard->ExportState();
  ASSERT_TRUE(good.ok());
  const std::vector<float> before = Rows(*shard, 0, ids0);
  PsShardState bad = *good;
  bad.tables.pop_back();
  EXPECT_TRUE(absl::IsFailedPrecondition(shard->RestoreState(bad, 0)));
  bad = *good;
  bad.tables[0].row_floats = 5;
  bad.tables[0].values.resize(bad.tables[0].ids.size() * 5);
  EXPECT_TRUE(absl::IsFailedPrecondition(shard->RestoreState(bad, 0)));
  bad = *good;
  bad.tables[1].ids[0] = Ids(1, 1, false)[0];  // another shard's row
  EXPECT_THAT(shard->RestoreState(bad, 0).message(),
              HasSubstr("belongs on shard 0"));
  bad = *good;
  bad.version = 0;
  bad.params[0] = 99.0f;
  bad.tables[0].values[0] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(shard->RestoreState(bad, 0).ok());
  EXPECT_EQ(Rows(*shard, 0, ids0), before);
  EXPECT_EQ(shard->version(), 1);
  EXPECT_NE(Params(*shard)[0], 99.0f);
  // A dense job refuses a state with tables.
  auto dense = MakeShard(TestConfig());
  EXPECT_TRUE(absl::IsFailedPrecondition(dense->RestoreState(*good, 0)));
}

TEST(PsShardSparse, CheckpointFilesCarryTheRows) {
  InMemoryFileSystem fs;
  auto shard = MakeShard(SparseConfig());
  PsCheckpointer checkpointer(shard.get(), &fs, "/ckpt");
  const std::vector<uint64_t> ids0 = Ids(0, 4), ids1 = Ids(1, 1);
  Step(*shard, 0, ids0, ids1);
  Step(*shard, 1, ids0, ids1);
  ASSERT_TRUE(checkpointer.Checkpoint("job", -1).ok());
  const std::vector<float> rows0 = Rows(*shard, 0, ids0);
  // A restarted shard resumes from the file with its rows.
  auto restarted = MakeShard(SparseConfig());
  PsCheckpointer again(restarted.get(), &fs, "/ckpt");
  auto resumed = again.Resume();
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_TRUE(resumed->has_value());
  EXPECT_EQ(restarted->version(), 2);
  EXPECT_EQ(Rows(*restarted, 0, ids0), rows0);
  EXPECT_EQ(restarted->Info().sparse->total.rows, 5);
}

}  // namespace
}  // namespace ferry

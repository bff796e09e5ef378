// PsCheckpointer's streamed writes of a shard with embedding tables: the
// rows are read in place (no copy), the file is the one a copy would give,
// it restores exactly the same rows, optimizer state, admission and event
// counters, and a write that fails leaves the previous checkpoint and the
// shard as they were.
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "common/checkpoint_io.h"
#include "common/file_system.h"
#include "common/sharding.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps/ps_checkpointer.h"
#include "ps/ps_shard.h"
#include "tests/ps/ps_shard_testing.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;

constexpr int kDim0 = 4, kDim1 = 2;

// Momentum on the slice (a dense state buffer), row-wise Adagrad on two
// tables, ids admitted on their second update.
PsShardConfig StreamConfig() {
  PsShardConfig config = TestConfig();
  config.optimizer.kind = OptimizerKind::kMomentum;
  config.optimizer.momentum = 0.9;
  SparseStoreConfig sparse;
  sparse.dims = {kDim0, kDim1};
  sparse.optimizer.kind = RowOptimizerKind::kAdagrad;
  sparse.optimizer.lr = 0.1f;
  sparse.seed = 9;
  sparse.admit_count = 2;
  config.sparse = sparse;
  return config;
}

// The first `n` ids of `table` from `first` on that live on this test's
// shard (kShard of 2).
std::vector<uint64_t> MyIds(int32_t table, uint64_t first, int n) {
  std::vector<uint64_t> ids;
  for (uint64_t id = first; static_cast<int>(ids.size()) < n; ++id) {
    if (ShardOfRow(table, id, 2) == kShard) ids.push_back(id);
  }
  return ids;
}

// Sync step `step` by one worker: the slice gradient plus rows of both
// tables.
void Step(PsShard& shard, int64_t step, const std::vector<uint64_t>& ids0,
          const std::vector<uint64_t>& ids1) {
  PsPushHeader h = Header("a", step, 2);
  h.step_contributors = {{"a", 2}};
  std::vector<float> g0(ids0.size() * kDim0), g1(ids1.size() * kDim1);
  for (size_t i = 0; i < g0.size(); ++i) g0[i] = 0.01f * (i % 13) - 0.05f;
  for (size_t i = 0; i < g1.size(); ++i) g1[i] = 0.3f - 0.02f * (i % 7);
  auto pushed = PushSlice(shard, h, {0.5f, -1.0f, 0.25f, 2.0f},
                          {{0, ids0, g0}, {1, ids1, g1}});
  ASSERT_TRUE(pushed.ok()) << pushed.status();
}

// An id gets its row on its third update (counted, admitted, created):
// 20,000 rows in table 0 (two storage blocks) created at step 2; in table 1
// 30 rows and 60 ids counted once (pending).
void Train(PsShard& shard) {
  const std::vector<uint64_t> many = MyIds(0, 0, 20000);
  Step(shard, 0, many, MyIds(1, 0, 50));
  Step(shard, 1, many, MyIds(1, 0, 30));
  std::vector<uint64_t> ids1 = MyIds(1, 0, 30), more = MyIds(1, 5000, 40);
  ids1.insert(ids1.end(), more.begin(), more.end());
  Step(shard, 2, many, ids1);
}

// The shard's state as a copy would write it.
ShardCheckpoint Copied(PsShard& shard) {
  absl::StatusOr<PsShardState> state = shard.ExportState();
  EXPECT_TRUE(state.ok()) << state.status();
  ShardCheckpoint c;
  c.identity = IdentityOf(shard);
  c.version = state->version;
  c.steps_applied = state->optimizer_steps;
  c.params = state->params;
  c.state = state->optimizer_state;
  c.tables = state->tables;
  return c;
}

using Pending = std::tuple<uint64_t, int32_t, int64_t>;

std::vector<Pending> SortedPending(const TableCheckpoint& t) {
  std::vector<Pending> out;
  for (size_t i = 0; i < t.pending_ids.size(); ++i) {
    out.emplace_back(t.pending_ids[i], t.pending_counts[i],
                     t.pending_last_seen[i]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Equal states: version, slice, optimizer state, and per table the rows
// (ids, last-seen steps, values + Adagrad accumulators, in order), the
// pending counters (in any order) and the event counters.
void ExpectSameState(PsShard& a, PsShard& b) {
  const ShardCheckpoint x = Copied(a), y = Copied(b);
  EXPECT_EQ(x.version, y.version);
  EXPECT_EQ(x.steps_applied, y.steps_applied);
  EXPECT_EQ(x.params, y.params);
  EXPECT_EQ(x.state, y.state);
  ASSERT_EQ(x.tables.size(), y.tables.size());
  for (size_t t = 0; t < x.tables.size(); ++t) {
    EXPECT_EQ(x.tables[t].ids, y.tables[t].ids) << t;
    EXPECT_EQ(x.tables[t].last_seen, y.tables[t].last_seen) << t;
    EXPECT_TRUE(x.tables[t].values == y.tables[t].values) << t;
    EXPECT_EQ(SortedPending(x.tables[t]), SortedPending(y.tables[t])) << t;
    EXPECT_EQ(x.tables[t].counters, y.tables[t].counters) << t;
  }
  const SparseStoreStats sa = *a.Info().sparse, sb = *b.Info().sparse;
  EXPECT_EQ(sa.total.rows, sb.total.rows);
  EXPECT_EQ(sa.total.pending_ids, sb.total.pending_ids);
  EXPECT_EQ(sa.total.rows_created, sb.total.rows_created);
  EXPECT_EQ(sa.total.ids_admitted, sb.total.ids_admitted);
  EXPECT_EQ(sa.total.updates_dropped, sb.total.updates_dropped);
}

TEST(PsCheckpointStream, RestoresExactlyTheSameRowsStateAndCounters) {
  InMemoryFileSystem fs;
  auto shard = MakeShard(StreamConfig());
  PsCheckpointer checkpointer(shard.get(), &fs, "/ckpt");
  Train(*shard);
  const SparseStoreStats stats = *shard->Info().sparse;
  ASSERT_GT(stats.tables[0].rows, SparseTable::kBlockRows);
  ASSERT_GT(stats.total.pending_ids, 0);
  ASSERT_GT(stats.total.updates_dropped, 0);
  absl::StatusOr<PsCheckpointWritten> written =
      checkpointer.Checkpoint("job", 3);
  ASSERT_TRUE(written.ok()) << written.status();
  // The bytes a copy of the state would have given, as format version 3.
  const std::string bytes = *fs.ReadFile(written->path);
  EXPECT_TRUE(bytes == EncodeCheckpoint(Copied(*shard)));
  EXPECT_EQ(static_cast<uint8_t>(bytes[8]), kCheckpointFormatWithTableCounters);

  // A restarted shard resumes into exactly that state.
  auto restarted = MakeShard(StreamConfig());
  PsCheckpointer again(restarted.get(), &fs, "/ckpt");
  auto resumed = again.Resume();
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_TRUE(resumed->has_value());
  ExpectSameState(*shard, *restarted);
  // And trains on identically.
  Step(*shard, 3, MyIds(0, 0, 10), MyIds(1, 5000, 40));
  Step(*restarted, 3, MyIds(0, 0, 10), MyIds(1, 5000, 40));
  ExpectSameState(*shard, *restarted);
}

TEST(PsCheckpointStream, APosixResumeAndRestoreReadTheFileInPlace) {
  std::string dir = ::testing::TempDir() + "/ferry-resume-XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  auto shard = MakeShard(StreamConfig());
  PsCheckpointer checkpointer(shard.get(), PosixFileSystem(), dir);
  Train(*shard);
  ASSERT_TRUE(checkpointer.Checkpoint("job", 3).ok());
  // A restarted shard maps the file and resumes into exactly that state.
  auto restarted = MakeShard(StreamConfig());
  PsCheckpointer again(restarted.get(), PosixFileSystem(), dir);
  auto resumed = again.Resume();
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_TRUE(resumed->has_value());
  EXPECT_EQ((*resumed)->version, 3);
  ExpectSameState(*shard, *restarted);
  // A step later, a restore to version 3 reads the file again and rolls
  // the rows back (new rows of table 1 included).
  Step(*restarted, 3, MyIds(0, 0, 10), MyIds(1, 9000, 40));
  Step(*restarted, 4, MyIds(0, 0, 10), MyIds(1, 9000, 40));
  Step(*restarted, 5, MyIds(0, 0, 10), MyIds(1, 9000, 40));
  ASSERT_NE(restarted->Info().sparse->total.rows,
            shard->Info().sparse->total.rows);
  auto restored = again.Restore("job", 3, /*generation=*/0);
  ASSERT_TRUE(restored.ok()) << restored.status();
  ExpectSameState(*shard, *restarted);
  // A corrupt file is DATA_LOSS and the shard stays as it was.
  Step(*restarted, 3, MyIds(0, 0, 10), MyIds(1, 9000, 40));
  const ShardCheckpoint before = Copied(*restarted);
  const std::string path = CheckpointPath(dir, kShard, 3);
  std::string bytes = *PosixFileSystem()->ReadFile(path);
  bytes[bytes.size() / 3] ^= 1;
  ASSERT_TRUE(PosixFileSystem()->WriteFileAtomically(path, bytes).ok());
  EXPECT_EQ(again.Restore("job", 3, 0).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(restarted->version(), 4);
  EXPECT_TRUE(EncodeCheckpoint(Copied(*restarted)) == EncodeCheckpoint(before));
  // Tables given both in the state and in place are refused.
  absl::StatusOr<PsShardState> state = restarted->ExportState();
  ASSERT_TRUE(state.ok());
  const TableCheckpointView view = TableCheckpointView::Of(state->tables[0]);
  EXPECT_EQ(restarted->RestoreState(*state, {&view, 1}, 3, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  std::filesystem::remove_all(dir);
}

TEST(PsCheckpointStream, TablesAreFilledOnlyBeforeTheFirstUpdate) {
  auto dense_only = MakeShard(TestConfig());
  const auto fill = [](SparseStore&) { return absl::OkStatus(); };
  EXPECT_EQ(dense_only->FillTables(fill).code(),
            absl::StatusCode::kFailedPrecondition);
  auto shard = MakeShard(StreamConfig());
  int calls = 0;
  ASSERT_TRUE(shard
                  ->FillTables([&](SparseStore& store) {
                    ++calls;
                    EXPECT_EQ(store.num_tables(), 2);
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(shard
                ->FillTables(
                    [](SparseStore&) { return absl::DataLossError("corrupt"); })
                .code(),
            absl::StatusCode::kDataLoss);
  Step(*shard, 0, MyIds(0, 0, 5), MyIds(1, 0, 5));
  EXPECT_EQ(shard->FillTables(fill).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(PsCheckpointStream, AFailedWriteLeavesThePreviousCheckpointAndTheShard) {
  InMemoryFileSystem fs;
  auto shard = MakeShard(StreamConfig());
  PsCheckpointer checkpointer(shard.get(), &fs, "/ckpt");
  Train(*shard);
  ASSERT_TRUE(checkpointer.Checkpoint("job", -1).ok());  // version 3
  const std::string v3_path = CheckpointPath("/ckpt", kShard, 3);
  const std::string v3 = *fs.ReadFile(v3_path);
  const auto first_time = checkpointer.last_checkpoint_time();
  Step(*shard, 3, MyIds(0, 0, 10), MyIds(1, 5000, 40));
  const std::string before = EncodeCheckpoint(Copied(*shard));

  // The disk fills up in the middle of the rows.
  fs.FailWritesAfter(static_cast<int64_t>(v3.size() / 2));
  const absl::Status failed = checkpointer.Checkpoint("job", -1).status();
  EXPECT_EQ(failed.code(), absl::StatusCode::kResourceExhausted) << failed;
  CheckpointStore store(&fs, "/ckpt", IdentityOf(*shard));
  EXPECT_THAT(*store.ListVersions(), ElementsAre(3));
  EXPECT_TRUE(*fs.ReadFile(v3_path) == v3);
  EXPECT_EQ(checkpointer.last_checkpoint_time(), first_time);
  EXPECT_TRUE(EncodeCheckpoint(Copied(*shard)) == before);
  // The shard trains on and writes its next checkpoint once there is room.
  fs.FailWritesAfter(-1);
  Step(*shard, 4, MyIds(0, 0, 10), MyIds(1, 0, 5));
  absl::StatusOr<PsCheckpointWritten> next = checkpointer.Checkpoint("job", 5);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_THAT(*store.ListVersions(), ElementsAre(3, 5));

  // A final checkpoint that fails at shutdown: the shard stops updating
  // anyway, and the checkpoint of version 5 stays.
  fs.FailWritesAfter(100);
  EXPECT_EQ(checkpointer.CheckpointAndStop().status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(*store.ListVersions(), ElementsAre(3, 5));
  EXPECT_EQ(PushSlice(*shard, Header("a", 5, 1), {1, 1, 1, 1}).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(PsCheckpointStream, EventCountersSurviveARestartAndFollowARollback) {
  InMemoryFileSystem fs;
  PsShardConfig config = StreamConfig();
  config.sparse->ttl_steps = 1;  // evictions too
  auto shard = MakeShard(config);
  PsCheckpointer checkpointer(shard.get(), &fs, "/ckpt");
  Train(*shard);
  // Ids counted at steps 3 and 4, given rows at step 5; step 4 evicts the
  // rows unseen since step 2.
  const std::vector<uint64_t> late0 = MyIds(0, 90000, 50),
                              late1 = MyIds(1, 90000, 50);
  Step(*shard, 3, late0, late1);
  Step(*shard, 4, late0, late1);
  const SparseTableStats at5 = shard->Info().sparse->total;
  ASSERT_GT(at5.evicted_ttl, 0);
  ASSERT_TRUE(checkpointer.Checkpoint("job", 5).ok());
  Step(*shard, 5, late0, late1);
  Step(*shard, 6, late0, late1);
  const SparseTableStats at7 = shard->Info().sparse->total;
  ASSERT_GT(at7.rows_created, at5.rows_created);
  ASSERT_TRUE(checkpointer.CheckpointAndStop().ok());

  // The restarted shard counts from where the stopped one was.
  auto restarted = MakeShard(config);
  PsCheckpointer again(restarted.get(), &fs, "/ckpt");
  ASSERT_TRUE(again.Resume().ok());
  SparseTableStats now = restarted->Info().sparse->total;
  EXPECT_EQ(now.rows_created, at7.rows_created);
  EXPECT_EQ(now.ids_admitted, at7.ids_admitted);
  EXPECT_EQ(now.updates_dropped, at7.updates_dropped);
  EXPECT_EQ(now.evicted_ttl, at7.evicted_ttl);
  EXPECT_EQ(now.evicted_memory, at7.evicted_memory);
  // A rollback to version 5 brings back that checkpoint's counts.
  ASSERT_TRUE(again.Restore("job", 5, 1).ok());
  now = restarted->Info().sparse->total;
  EXPECT_EQ(now.rows_created, at5.rows_created);
  EXPECT_EQ(now.ids_admitted, at5.ids_admitted);
  EXPECT_EQ(now.evicted_ttl, at5.evicted_ttl);
  EXPECT_EQ(now.updates_dropped, at5.updates_dropped);
}

}  // namespace
}  // namespace ferry

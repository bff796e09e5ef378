// PsShard's state export / restore / rollback and PsCheckpointer over an
// in-memory file system.
#include <limits>
#include <string>
#include <vector>

#include "common/checkpoint_io.h"
#include "common/file_system.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps/ps_checkpointer.h"
#include "ps/ps_shard.h"
#include "tests/ps/ps_shard_testing.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Snapshot = absl::StatusOr<std::shared_ptr<const PsSnapshot>>;

PsShardConfig MomentumConfig() {
  PsShardConfig config = TestConfig();
  config.optimizer.kind = OptimizerKind::kMomentum;
  config.optimizer.momentum = 0.9;
  return config;
}

// Runs sync step `step` on `shard` with one worker's gradient.
void Step(PsShard& shard, int64_t step, const std::vector<float>& g) {
  ASSERT_TRUE(PushSlice(shard, Header("a", step, 1), g).ok());
  ASSERT_TRUE(shard.FinalizeStep("job", step, {{"a", 1}}, 0).ok());
}

TEST(PsShardStateTest, ExportRestoreRoundTripIncludesOptimizerState) {
  auto a = MakeShard(MomentumConfig());
  Step(*a, 0, {1, 2, 3, 4});
  Step(*a, 1, {-1, 0.5f, 2, 0});
  absl::StatusOr<PsShardState> state = a->ExportState();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->version, 2);
  EXPECT_EQ(state->optimizer_steps, 2);
  EXPECT_EQ(state->params, Params(*a));
  ASSERT_EQ(state->optimizer_state.size(), 1u);  // the momentum buffer
  EXPECT_EQ(a->ExportState(1).status().code(),
            absl::StatusCode::kFailedPrecondition);

  auto b = MakeShard(MomentumConfig());
  ASSERT_TRUE(b->RestoreState(*state, 0).ok());
  EXPECT_EQ(b->version(), 2);
  EXPECT_EQ(Params(*b), Params(*a));
  // The same next step gives bit-identical weights only if the momentum and
  // the step count (learning-rate schedule) came back too.
  Step(*a, 2, {0.25f, 1, -3, 2});
  Step(*b, 2, {0.25f, 1, -3, 2});
  EXPECT_EQ(Params(*b), Params(*a));
  EXPECT_EQ(b->version(), 3);
}

TEST(PsShardStateTest, RestoreValidatesAndChangesNothingOnError) {
  auto shard = MakeShard(MomentumConfig());
  PsShardState state = *shard->ExportState();
  state.params.pop_back();
  EXPECT_EQ(shard->RestoreState(state, 0).code(),
            absl::StatusCode::kFailedPrecondition);
  state = *shard->ExportState();
  state.optimizer_state.clear();  // an SGD checkpoint for a momentum shard
  EXPECT_THAT(std::string(shard->RestoreState(state, 0).message()),
              HasSubstr("optimizer buffers"));
  state = *shard->ExportState();
  state.optimizer_state[0][1] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(shard->RestoreState(state, 0).code(),
            absl::StatusCode::kInvalidArgument);
  state = *shard->ExportState();
  state.version = -1;
  EXPECT_EQ(shard->RestoreState(state, 0).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(shard->version(), 0);
  EXPECT_EQ(Params(*shard), TestConfig().initial_slice);
}

TEST(PsShardStateTest, RestoreDropsPushesAbortsWaitsAndFences) {
  auto shard = MakeShard(TestConfig());
  const PsShardState v0 = *shard->ExportState();
  Step(*shard, 0, {2, 4, 6, 8});
  ASSERT_TRUE(PushSlice(*shard, Header("a", 1, 1), {1, 1, 1, 1}).ok());
  // b's push is being received while the restore happens.
  auto staging = shard->BeginPush(Header("b", 1, 1));
  ASSERT_TRUE(staging.ok());
  std::vector<absl::Status> waits;
  for (int64_t v : {2, 5}) {
    ASSERT_TRUE(
        shard
            ->WaitForVersion("job", v,
                             [&](Snapshot s) { waits.push_back(s.status()); })
            .ok());
  }

  ASSERT_TRUE(shard->RestoreState(v0, /*generation=*/3).ok());
  EXPECT_EQ(shard->version(), 0);
  EXPECT_EQ(Params(*shard), TestConfig().initial_slice);
  ASSERT_EQ(waits.size(), 2u);
  for (const absl::Status& s : waits) {
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("rolled back to version 0"));
  }
  EXPECT_EQ(shard->Info().pending_pulls, 0);
  EXPECT_EQ(shard->Info().max_generation, 3);
  // The staged push cannot commit any more.
  for (int32_t id : {2, 3, 4}) {
    std::vector<float> g(static_cast<size_t>(id == 3 ? 2 : 1), 1.0f);
    ASSERT_TRUE(shard->AddChunk(**staging, id, absl::MakeSpan(g)).ok());
  }
  EXPECT_EQ(shard->CommitPush(*std::move(staging)).status().code(),
            absl::StatusCode::kAborted);
  // Older generations are fenced; the current one trains from version 0.
  EXPECT_EQ(
      PushSlice(*shard, Header("a", 0, 1, 2), {1, 1, 1, 1}).status().code(),
      absl::StatusCode::kAborted);
  ASSERT_TRUE(PushSlice(*shard, Header("a", 0, 1, 3), {2, 4, 6, 8}).ok());
  EXPECT_EQ(shard->FinalizeStep("job", 0, {{"a", 1}}, 2).status().code(),
            absl::StatusCode::kAborted);
  ASSERT_TRUE(shard->FinalizeStep("job", 0, {{"a", 1}}, 3).ok());
  EXPECT_THAT(Params(*shard), ElementsAre(0.0f, 0.0f, 0.0f, 0.0f));
  // A lower generation never lowers the fence.
  ASSERT_TRUE(shard->RestoreState(v0, 1).ok());
  EXPECT_EQ(shard->Info().max_generation, 3);
}

TEST(PsShardStateTest, RollBackOpenStepKeepsTheStateAndDropsThePushes) {
  auto shard = MakeShard(TestConfig());
  Step(*shard, 0, {2, 4, 6, 8});
  const std::vector<float> before = Params(*shard);
  ASSERT_TRUE(PushSlice(*shard, Header("a", 1, 1), {1, 1, 1, 1}).ok());
  absl::Status wait;
  ASSERT_TRUE(
      shard->WaitForVersion("job", 2, [&](Snapshot s) { wait = s.status(); })
          .ok());
  EXPECT_EQ(shard->RollBackOpenStep(0, 1).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(shard->RollBackOpenStep(1, 1).ok());
  EXPECT_EQ(wait.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(shard->version(), 1);
  EXPECT_EQ(Params(*shard), before);
  EXPECT_EQ(shard->FinalizeStep("job", 1, {{"a", 1}}, 1).status().code(),
            absl::StatusCode::kFailedPrecondition);  // a's push is gone
  ASSERT_TRUE(PushSlice(*shard, Header("a", 1, 1, 1), {1, 1, 1, 1}).ok());
}

TEST(PsShardStateTest, RaiseFenceRefusesOlderPushesAndKeepsHeldOnes) {
  auto shard = MakeShard(TestConfig());
  ASSERT_TRUE(PushSlice(*shard, Header("a", 0, 1, 1), {1, 1, 1, 1}).ok());
  // b's push began before the fence: its commit is checked against it.
  const std::vector<float> g = {1, 1, 1, 1};
  auto begun = shard->BeginPush(Header("b", 0, 1, 1));
  ASSERT_TRUE(begun.ok());
  ASSERT_TRUE(shard->AddChunk(**begun, 2, absl::MakeSpan(&g[0], 1)).ok());
  ASSERT_TRUE(shard->AddChunk(**begun, 3, absl::MakeSpan(&g[1], 2)).ok());
  ASSERT_TRUE(shard->AddChunk(**begun, 4, absl::MakeSpan(&g[3], 1)).ok());

  absl::StatusOr<int64_t> fence = shard->RaiseFence("job", 2);
  ASSERT_TRUE(fence.ok()) << fence.status();
  EXPECT_EQ(*fence, 2);
  EXPECT_EQ(shard->Info().max_generation, 2);
  EXPECT_EQ(shard->CommitPush(std::move(begun).value()).status().code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(
      PushSlice(*shard, Header("c", 0, 1, 1), {1, 1, 1, 1}).status().code(),
      absl::StatusCode::kAborted);
  ASSERT_TRUE(PushSlice(*shard, Header("c", 0, 1, 2), {1, 1, 1, 1}).ok());
  // a's push, held from before the fence, still counts.
  EXPECT_TRUE(shard->FinalizeStep("job", 0, {{"a", 1}, {"c", 1}}, 2).ok());
  EXPECT_EQ(shard->version(), 1);

  // Never lowered; bad requests change nothing.
  EXPECT_EQ(*shard->RaiseFence("job", 1), 2);
  EXPECT_EQ(shard->RaiseFence("other", 5).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(shard->RaiseFence("job", -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(shard->Info().max_generation, 2);
}

TEST(PsShardStateTest, StopUpdatesFreezesTheState) {
  auto shard = MakeShard(TestConfig());
  Step(*shard, 0, {2, 4, 6, 8});
  ASSERT_TRUE(PushSlice(*shard, Header("a", 1, 1), {1, 1, 1, 1}).ok());
  absl::StatusOr<PsShardState> last = shard->StopUpdates();
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->version, 1);
  EXPECT_EQ(shard->FinalizeStep("job", 1, {{"a", 1}}, 0).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(PushSlice(*shard, Header("b", 1, 1), {1, 1, 1, 1}).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(shard->RestoreState(*last, 0).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(shard->version(), 1);
  EXPECT_EQ(Params(*shard), last->params);  // pulls still answer
}

class PsCheckpointerTest : public ::testing::Test {
 protected:
  std::unique_ptr<PsShard> shard_ = MakeShard(MomentumConfig());
  InMemoryFileSystem fs_;
  PsCheckpointer checkpointer_{shard_.get(), &fs_, "/ckpt"};
};

TEST_F(PsCheckpointerTest, CheckpointThenRestoreAnOlderVersion) {
  Step(*shard_, 0, {1, 2, 3, 4});
  absl::StatusOr<PsCheckpointWritten> written =
      checkpointer_.Checkpoint("job", 1);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->path, "/ckpt/shard-1-v000000000001.ckpt");
  EXPECT_EQ(written->version, 1);
  const std::vector<float> v1 = Params(*shard_);
  Step(*shard_, 1, {1, 1, 1, 1});
  ASSERT_TRUE(checkpointer_.Checkpoint("job", -1).ok());  // v2
  Step(*shard_, 2, {1, 1, 1, 1});

  EXPECT_EQ(checkpointer_.Checkpoint("job", 2).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(checkpointer_.Checkpoint("other", -1).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(checkpointer_.Restore("job", 0, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);  // no checkpoint of v0

  absl::StatusOr<int64_t> restored = checkpointer_.Restore("job", 1, 4);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(*restored, 1);
  EXPECT_EQ(shard_->version(), 1);
  EXPECT_EQ(Params(*shard_), v1);
  EXPECT_EQ(shard_->Info().max_generation, 4);
  // v2 belonged to the abandoned timeline.
  CheckpointStore store(&fs_, "/ckpt", IdentityOf(*shard_));
  EXPECT_THAT(*store.ListVersions(), ElementsAre(1));
  // Restoring to the current version needs no file.
  ASSERT_TRUE(checkpointer_.Restore("job", 1, 4).ok());
}

TEST_F(PsCheckpointerTest, ResumeLoadsTheNewestAndStopWritesTheLast) {
  EXPECT_EQ(*checkpointer_.Resume(), std::nullopt);  // empty directory
  Step(*shard_, 0, {1, 2, 3, 4});
  Step(*shard_, 1, {1, 1, 1, 1});
  absl::StatusOr<std::optional<PsCheckpointWritten>> last =
      checkpointer_.CheckpointAndStop();
  ASSERT_TRUE(last.ok() && last->has_value()) << last.status();
  EXPECT_EQ((*last)->version, 2);
  EXPECT_EQ(PushSlice(*shard_, Header("a", 2, 1), {1, 1, 1, 1}).status().code(),
            absl::StatusCode::kUnavailable);

  auto restarted = MakeShard(MomentumConfig());
  PsCheckpointer again(restarted.get(), &fs_, "/ckpt");
  absl::StatusOr<std::optional<PsCheckpointWritten>> resumed = again.Resume();
  ASSERT_TRUE(resumed.ok() && resumed->has_value()) << resumed.status();
  EXPECT_EQ((*resumed)->version, 2);
  EXPECT_EQ((*resumed)->path, "/ckpt/shard-1-v000000000002.ckpt");
  EXPECT_EQ(restarted->version(), 2);
  EXPECT_EQ(Params(*restarted), Params(*shard_));
}

TEST_F(PsCheckpointerTest, ResumeRefusesACheckpointOfAnotherOptimizer) {
  ASSERT_TRUE(checkpointer_.Checkpoint("job", 0).ok());
  auto sgd = MakeShard(TestConfig());  // same slice, no momentum buffer
  PsCheckpointer other(sgd.get(), &fs_, "/ckpt");
  EXPECT_EQ(other.Resume().status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(PsCheckpointerNoDirTest, OnlyRestoringTheCurrentVersionWorks) {
  auto shard = MakeShard(TestConfig());
  PsCheckpointer checkpointer(shard.get(), PosixFileSystem(), "");
  EXPECT_FALSE(checkpointer.has_directory());
  const absl::Status status = checkpointer.Checkpoint("job", -1).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("no checkpoint directory"));
  EXPECT_EQ(checkpointer.Restore("job", 3, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(checkpointer.Restore("job", 0, 2).ok());
  EXPECT_EQ(*checkpointer.Resume(), std::nullopt);
  absl::StatusOr<std::optional<PsCheckpointWritten>> last =
      checkpointer.CheckpointAndStop();
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(*last, std::nullopt);
}

}  // namespace
}  // namespace ferry

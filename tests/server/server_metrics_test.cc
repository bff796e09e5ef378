// Prometheus metrics of the server roles: the core classes' inline counters
// and histograms, and the scrape hooks of server/server_metrics.h and
// ps/shard_gauges.h. The
// registry is global: every check compares values before and after.
#include "server/server_metrics.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/file_system.h"
#include "common/prometheus_metrics.h"
#include "common/sharding.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps/shard_gauges.h"
#include "tests/coordinator/coordinator_fixture.h"
#include "tests/ps/ps_shard_testing.h"
#include "tests/testing/wait_until.h"

namespace ferry {
namespace {

uint64_t Count(prometheus::Histogram& h) {
  return h.Collect().histogram.sample_count;
}

double Rejected(MetricRole role, const std::string& op, absl::StatusCode code) {
  return Metrics().rejected(role, op, code).Value();
}

// A process of several partitions reports the version every partition has
// (the lowest) and their pending pulls summed.
TEST(ServerMetricsTest, PartitionsOfOneProcessAreAggregated) {
  FerryMetrics& m = Metrics();
  auto ahead = MakeShard(TestConfig());
  auto behind = MakeShard(TestConfig());
  auto gauges = ExportShardGauges(
      {ShardGaugeSource{ahead.get(), nullptr}, {behind.get(), nullptr}});
  ASSERT_TRUE(PushSlice(*ahead, Header("w1", 0, 2), {1, 2, 3, 4}).ok());
  ASSERT_TRUE(ahead->FinalizeStep("job", 0, {{"w1", 2}}, 0).ok());
  ASSERT_TRUE(ahead->WaitForVersion("job", 2, [](auto) {}).ok());
  ASSERT_TRUE(behind->WaitForVersion("job", 1, [](auto) {}).ok());
  RunScrapeHooks();
  EXPECT_EQ(m.model_version(MetricRole::kPs).Value(), 0);
  EXPECT_EQ(m.pending_pulls().Value(), 2);
  ASSERT_TRUE(PushSlice(*behind, Header("w1", 0, 2), {1, 2, 3, 4}).ok());
  ASSERT_TRUE(behind->FinalizeStep("job", 0, {{"w1", 2}}, 0).ok());
  RunScrapeHooks();
  EXPECT_EQ(m.model_version(MetricRole::kPs).Value(), 1);
  EXPECT_EQ(m.pending_pulls().Value(), 1);
  ahead->Shutdown();
}

TEST(ServerMetricsTest, PushAndPullThroughTheShardMoveCountersAndHistograms) {
  FerryMetrics& m = Metrics();
  auto shard = MakeShard(TestConfig());
  auto gauges = ExportShardGauges(shard.get(), nullptr);
  const uint64_t pushes0 = Count(m.push_seconds(MetricRole::kPs));
  const uint64_t pulls0 = Count(m.pull_seconds(MetricRole::kPs));
  const double received0 = m.bytes(MetricRole::kPs, "worker", false).Value();
  const double sent0 = m.bytes(MetricRole::kPs, "worker", true).Value();

  // A pull waiting for version 1.
  bool answered = false;
  absl::StatusOr<PullWaitId> wait = shard->WaitForVersion(
      "job", 1, [&](absl::StatusOr<std::shared_ptr<const PsSnapshot>> s) {
        answered = s.ok();
      });
  ASSERT_TRUE(wait.ok()) << wait.status();
  RunScrapeHooks();
  EXPECT_EQ(m.pending_pulls().Value(), 1);
  EXPECT_EQ(m.model_version(MetricRole::kPs).Value(), 0);

  ASSERT_TRUE(PushSlice(*shard, Header("w1", 0, 2), {1, 2, 3, 4}).ok());
  shard->RecordBytes("worker", 7, 100);
  EXPECT_EQ(Count(m.push_seconds(MetricRole::kPs)), pushes0 + 1);
  ASSERT_TRUE(shard->FinalizeStep("job", 0, {{"w1", 2}}, 0).ok());
  EXPECT_TRUE(answered);
  EXPECT_EQ(Count(m.pull_seconds(MetricRole::kPs)), pulls0 + 1);
  // A pull of a version that exists is answered at once (0 s).
  ASSERT_TRUE(shard->WaitForVersion("job", 1, [](auto) {}).ok());
  EXPECT_EQ(Count(m.pull_seconds(MetricRole::kPs)), pulls0 + 2);
  EXPECT_EQ(m.bytes(MetricRole::kPs, "worker", false).Value(), received0 + 100);
  EXPECT_EQ(m.bytes(MetricRole::kPs, "worker", true).Value(), sent0 + 7);

  RunScrapeHooks();
  EXPECT_EQ(m.pending_pulls().Value(), 0);
  EXPECT_EQ(m.model_version(MetricRole::kPs).Value(), 1);
  const std::string text = SerializeMetrics();
  EXPECT_THAT(text, ::testing::HasSubstr("ferry_model_version{role=\"ps\"} 1"));
  EXPECT_THAT(text,
              ::testing::HasSubstr("ferry_push_seconds_count{role=\"ps\"}"));
}

TEST(ServerMetricsTest, RejectedInputsAreCountedByOpAndReason) {
  auto shard = MakeShard(TestConfig());
  const double bad_chunk0 =
      Rejected(MetricRole::kPs, "push", absl::StatusCode::kInvalidArgument);
  const double bad_step0 =
      Rejected(MetricRole::kPs, "push", absl::StatusCode::kFailedPrecondition);
  const double finalize0 =
      Rejected(MetricRole::kPs, "finalize", absl::StatusCode::kInvalidArgument);
  const double pull0 =
      Rejected(MetricRole::kPs, "pull", absl::StatusCode::kFailedPrecondition);

  // A NaN in a chunk, then a push for a step that is not open.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(absl::IsInvalidArgument(
      PushSlice(*shard, Header("w1", 0, 1), {1, nan, 3, 4}).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(
      PushSlice(*shard, Header("w1", 5, 1), {1, 2, 3, 4}).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(shard->FinalizeStep("job", 0, {}, 0).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(
      shard->WaitForVersion("other", 0, [](auto) {}).status()));

  EXPECT_EQ(
      Rejected(MetricRole::kPs, "push", absl::StatusCode::kInvalidArgument),
      bad_chunk0 + 1);
  EXPECT_EQ(
      Rejected(MetricRole::kPs, "push", absl::StatusCode::kFailedPrecondition),
      bad_step0 + 1);
  EXPECT_EQ(
      Rejected(MetricRole::kPs, "finalize", absl::StatusCode::kInvalidArgument),
      finalize0 + 1);
  EXPECT_EQ(
      Rejected(MetricRole::kPs, "pull", absl::StatusCode::kFailedPrecondition),
      pull0 + 1);
  EXPECT_THAT(
      SerializeMetrics(),
      ::testing::HasSubstr(
          "ferry_rejected_inputs_total{op=\"push\",reason=\"invalid_argument\","
          "role=\"ps\"}"));
}

TEST(ServerMetricsTest, AsyncPushesReportStaleness) {
  FerryMetrics& m = Metrics();
  auto shard = MakeShard(TestConfig(PsConsistency::kAsync));
  const uint64_t observed0 = Count(m.push_staleness_steps());
  ASSERT_TRUE(
      PushSlice(*shard, Header("w1", 0, 1, 0, /*base_version=*/0), {1, 1, 1, 1})
          .ok());
  EXPECT_EQ(m.staleness_steps().Value(), 0);
  // Computed on version 0, applied at version 1.
  ASSERT_TRUE(
      PushSlice(*shard, Header("w2", 0, 1, 0, /*base_version=*/0), {1, 1, 1, 1})
          .ok());
  EXPECT_EQ(m.staleness_steps().Value(), 1);
  EXPECT_EQ(Count(m.push_staleness_steps()), observed0 + 2);
}

TEST(ServerMetricsTest, ShardCheckpointAgeIsMinusOneUntilTheFirstCheckpoint) {
  FerryMetrics& m = Metrics();
  auto shard = MakeShard(TestConfig());
  InMemoryFileSystem fs;
  PsCheckpointer checkpointer(shard.get(), &fs, "/ckpt");
  auto gauges = ExportShardGauges(shard.get(), &checkpointer);
  RunScrapeHooks();
  EXPECT_EQ(m.checkpoint_age_seconds(MetricRole::kPs).Value(), -1);
  ASSERT_TRUE(checkpointer.Checkpoint("job", -1).ok());
  RunScrapeHooks();
  const double age = m.checkpoint_age_seconds(MetricRole::kPs).Value();
  EXPECT_GE(age, 0);
  EXPECT_LT(age, 60);
}

TEST(ServerMetricsTest, ShardEmbeddingRowsAndEventsAreExported) {
  FerryMetrics& m = Metrics();
  PsShardConfig config = TestConfig();
  SparseStoreConfig sparse;
  sparse.shard_id = config.shard_id;
  sparse.num_shards = config.num_shards;
  sparse.dims = {2};
  sparse.optimizer.kind = RowOptimizerKind::kSgd;
  sparse.optimizer.lr = 1.0f;
  sparse.admit_count = 2;  // an id's first sighting stores nothing
  config.sparse = sparse;
  auto shard = MakeShard(config);
  auto gauges = ExportShardGauges(shard.get(), nullptr);
  const auto events = [&](EmbeddingEvent e) {
    return m.embedding_events(e).Value();
  };
  const double created0 = events(EmbeddingEvent::kCreated);
  const double dropped0 = events(EmbeddingEvent::kDroppedUpdate);
  std::vector<uint64_t> ids;  // three ids placed on this shard
  for (uint64_t id = 1; ids.size() < 3; ++id) {
    if (ShardOfRow(0, id, config.num_shards) == config.shard_id) {
      ids.push_back(id);
    }
  }
  const auto step = [&](int64_t s) {
    SparseRows rows;
    rows.table = 0;
    rows.ids = ids;
    rows.grads.assign(ids.size() * 2, 0.5f);
    ASSERT_TRUE(
        PushSlice(*shard, Header("w1", s, 1), {0, 0, 0, 0}, {rows}).ok());
    ASSERT_TRUE(shard->FinalizeStep("job", s, {{"w1", 1}}, 0).ok());
  };
  const double admitted0 = events(EmbeddingEvent::kAdmitted);
  step(0);  // counted, not admitted
  RunScrapeHooks();
  EXPECT_EQ(m.embedding_rows(false).Value(), 0);
  EXPECT_EQ(m.embedding_rows(true).Value(), 3);
  EXPECT_EQ(events(EmbeddingEvent::kDroppedUpdate), dropped0 + 3);
  step(1);  // the second sighting admits them (its update still dropped)
  RunScrapeHooks();
  EXPECT_EQ(events(EmbeddingEvent::kAdmitted), admitted0 + 3);
  EXPECT_EQ(events(EmbeddingEvent::kDroppedUpdate), dropped0 + 6);
  step(2);  // the next update creates their rows
  RunScrapeHooks();
  EXPECT_EQ(m.embedding_rows(false).Value(), 3);
  EXPECT_EQ(m.embedding_rows(true).Value(), 0);
  EXPECT_EQ(events(EmbeddingEvent::kCreated), created0 + 3);
  EXPECT_GT(m.embedding_bytes().Value(), 0);
  RunScrapeHooks();  // nothing new: nothing added twice
  EXPECT_EQ(events(EmbeddingEvent::kCreated), created0 + 3);
}

TEST(ServerMetricsTest, CoordinatorCountsStepsSamplesMembersAndRejections) {
  FerryMetrics& m = Metrics();
  const double steps0 = m.steps(MetricRole::kCoordinator).Value();
  const double samples0 = m.samples(MetricRole::kCoordinator).Value();
  const double wrong_job0 = Rejected(MetricRole::kCoordinator, "register",
                                     absl::StatusCode::kFailedPrecondition);
  Fixture f(Job(10, 1), 20);
  auto gauges = ExportCoordinatorGauges(f.coordinator.get());
  const std::string a = f.Join();
  RunScrapeHooks();
  EXPECT_EQ(m.members().Value(), 1);
  EXPECT_GE(m.generation(MetricRole::kCoordinator).Value(), 1);
  EXPECT_EQ(m.checkpoint_age_seconds(MetricRole::kCoordinator).Value(),
            -1);  // no state_dir
  EXPECT_EQ(m.job_samples_applied().Value(), 0);
  EXPECT_EQ(m.job_finished().Value(), 0);

  auto r = Next(*f.coordinator, a);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->action(), v1::NextTaskResponse::TRAIN);
  const v1::StepReport done = Done(*r);
  auto next = NextWork(*f.coordinator, a, &done);
  ASSERT_TRUE(next.ok()) << next.status();
  WaitForFinalize(f.shards, 1);
  // The step is applied right after the shards finalized it.
  const absl::Status applied = testutil::WaitUntil(
      "the coordinator's step counter to count the step",
      [&] { return m.steps(MetricRole::kCoordinator).Value() >= steps0 + 1; });
  EXPECT_TRUE(applied.ok()) << applied;
  EXPECT_EQ(m.steps(MetricRole::kCoordinator).Value(), steps0 + 1);
  EXPECT_EQ(m.samples(MetricRole::kCoordinator).Value(), samples0 + 10);
  RunScrapeHooks();
  EXPECT_EQ(m.model_version(MetricRole::kCoordinator).Value(), 1);
  EXPECT_EQ(m.job_samples_applied().Value(), 10);
  EXPECT_EQ(m.job_finished().Value(), f.coordinator->finished() ? 1 : 0);

  v1::RegisterRequest wrong;
  wrong.set_job_id("another-job");
  EXPECT_TRUE(
      absl::IsFailedPrecondition(f.coordinator->Register(wrong).status()));
  EXPECT_EQ(Rejected(MetricRole::kCoordinator, "register",
                     absl::StatusCode::kFailedPrecondition),
            wrong_job0 + 1);

  // The coordinator's own traffic reaches ferry_bytes_total at the scrape.
  const double sent0 =
      m.bytes(MetricRole::kCoordinator, "worker", true).Value();
  f.coordinator->CountBytes("worker", 50, 5);
  RunScrapeHooks();
  EXPECT_EQ(m.bytes(MetricRole::kCoordinator, "worker", true).Value(),
            sent0 + 50);
  gauges.reset();
}

}  // namespace
}  // namespace ferry

// PsExchange over a recording ParameterClient, and the one factory that
// picks a job's exchange.
#include "worker/ps_exchange.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/dlrm_spec.h"
#include "model/model_spec.h"
#include "proto/job_convert.h"
#include "tests/worker/recording_parameter_client.h"
#include "tests/worker/worker_test_fixture.h"
#include "worker/make_gradient_exchange.h"

namespace ferry {
namespace {

constexpr int64_t kN = 6;

using ::ferry::testing::Calls;
using RecordingClient = ::ferry::testing::RecordingParameterClient;

// Host buffers of `n` elements over `params` and `grads`.
ExchangeBuffers HostBuffers(int64_t n, std::vector<float>& params,
                            std::vector<float>& grads) {
  ExchangeBuffers b;
  b.num_elements = n;
  b.params = b.host_params = params.data();
  b.grads = b.host_grads = grads.data();
  return b;
}

// A pipeline stage's own host buffers: its parameters [2, 4) and its state
// [5, 6) back to back, over `params` and `grads` (3 elements each).
ExchangeBuffers StageBuffers(std::vector<float>& params,
                             std::vector<float>& grads) {
  ExchangeBuffers b = HostBuffers(3, params, grads);
  b.segments = {{2, 4}, {5, 6}};
  return b;
}

class PsExchangeTest : public ::testing::Test {
 protected:
  PsExchangeTest() : backend_(*MakeBackend(DeviceChoice::kCpu, 1)) {
    buffers_.num_elements = kN;
    buffers_.params = params_.data();
    buffers_.grads = grads_.data();
    buffers_.host_params = params_.data();
    buffers_.host_grads = grads_.data();
    exchange_ = std::make_unique<PsExchange>(
        std::make_unique<RecordingClient>(&calls_, kN), backend_.get(),
        buffers_, absl::Seconds(2));
  }

  Calls calls_;
  std::unique_ptr<ComputeBackend> backend_;
  std::vector<float> params_ = std::vector<float>(kN, -1.0f);
  std::vector<float> grads_ = std::vector<float>(kN, 0.5f);
  ExchangeBuffers buffers_;
  std::unique_ptr<PsExchange> exchange_;
};

TEST_F(PsExchangeTest, PullsThenPushesTheStepTaggedWithThePulledVersion) {
  v1::NextTaskResponse lease;
  lease.set_step(7);
  lease.set_pull_version(7);
  ExchangeStep step =
      ExchangeStep::Of(&lease, /*generation=*/3, /*num_samples=*/4);
  ASSERT_TRUE(exchange_->BeginStep(step).ok());
  EXPECT_THAT(calls_.pulls, ::testing::ElementsAre(7));
  EXPECT_EQ(params_[5], 5.0f);  // pulled into params
  ASSERT_EQ(calls_.pushes.size(), 1u);
  EXPECT_EQ(calls_.pushes[0].step, 7);
  EXPECT_EQ(calls_.pushes[0].generation, 3);
  EXPECT_EQ(calls_.pushes[0].num_samples, 4);
  EXPECT_EQ(calls_.pushes[0].base_version, 9);
  grads_[4] = 2.5f;
  ASSERT_TRUE(exchange_->Ready(4, 2).ok());
  ASSERT_TRUE(exchange_->Ready(0, 4).ok());
  EXPECT_THAT(calls_.ready, ::testing::ElementsAre(std::make_pair(4, 2.5f),
                                                   std::make_pair(0, 0.5f)));
  ASSERT_TRUE(exchange_->FinishStep().ok());
  EXPECT_EQ(calls_.finished, 1);
  // The step is closed: nothing more to declare or finish.
  EXPECT_TRUE(absl::IsFailedPrecondition(exchange_->Ready(0, 1)));
  EXPECT_TRUE(absl::IsFailedPrecondition(exchange_->FinishStep()));

  v1::StepReport report;
  ASSERT_TRUE(exchange_->AddToReport(report).ok());
  EXPECT_EQ(report.bytes().sent().at("ps"), 100);
  EXPECT_EQ(report.bytes().received().at("ps"), 200);
  EXPECT_EQ(report.bytes().calls().at("ps"), 3);
  EXPECT_FALSE(report.has_weights_digest());
}

// A pipeline stage pulls only its layers each step; the final weights are
// the whole buffer again.
TEST_F(PsExchangeTest, StepWithAPullRangePullsOnlyThatRange) {
  v1::NextTaskResponse lease;
  lease.set_step(2);
  lease.set_pull_version(2);
  ExchangeStep step = ExchangeStep::Of(&lease, 1, 2);
  step.pull_ranges = {{2, 5}};
  ASSERT_TRUE(exchange_->BeginStep(step).ok());
  EXPECT_THAT(params_, ::testing::ElementsAre(-1, -1, 2, 3, 4, -1));
  exchange_->AbandonStep();
  ASSERT_TRUE(exchange_->BeginStep(ExchangeStep::Of(&lease, 1, 2)).ok());
  EXPECT_THAT(params_, ::testing::ElementsAre(0, 1, 2, 3, 4, 5));
  exchange_->AbandonStep();
  step.pull_ranges = {{0, 1}};
  ASSERT_TRUE(exchange_->BeginStep(step).ok());
  exchange_->AbandonStep();
  absl::StatusOr<std::vector<float>> final_weights = exchange_->FinalWeights();
  ASSERT_TRUE(final_weights.ok());
  EXPECT_EQ(final_weights->size(), static_cast<size_t>(kN));
  EXPECT_THAT(
      calls_.pull_ranges,
      ::testing::ElementsAre(std::make_pair(2, 5), std::make_pair(0, 0),
                             std::make_pair(0, 1), std::make_pair(0, 0)));
}

// A PS pipeline stage's own buffers hold only its parameters [2, 4) and
// its state [5, 6), back to back: each range is pulled into its place,
// Ready's flat offsets are translated, the rest of the gradient goes as
// ReadyZeros, and ranges the buffers do not hold are refused.
TEST_F(PsExchangeTest, StepWithItsOwnBuffersHoldingOnlyItsRanges) {
  std::vector<float> params(3, -1.0f), grads = {7.0f, 8.0f, 9.0f};
  const ExchangeBuffers stage = StageBuffers(params, grads);
  v1::NextTaskResponse lease;
  lease.set_step(4);
  lease.set_pull_version(4);
  ExchangeStep step = ExchangeStep::Of(&lease, 1, 2);
  step.pull_ranges = {{2, 4}, {5, 6}};
  step.buffers = &stage;
  ASSERT_TRUE(exchange_->BeginStep(step).ok());
  EXPECT_THAT(params, ::testing::ElementsAre(2, 3, 5));
  EXPECT_THAT(params_,
              ::testing::Each(-1.0f));  // the exchange's own: untouched
  EXPECT_THAT(calls_.pull_ranges, ::testing::ElementsAre(std::make_pair(2, 4),
                                                         std::make_pair(5, 6)));
  ASSERT_TRUE(exchange_->ReadyZeros(0, 2).ok());
  ASSERT_TRUE(exchange_->Ready(3, 1).ok());
  ASSERT_TRUE(exchange_->Ready(2, 1).ok());
  ASSERT_TRUE(exchange_->ReadyZeros(4, 1).ok());
  ASSERT_TRUE(exchange_->Ready(5, 1).ok());
  EXPECT_THAT(calls_.ready, ::testing::ElementsAre(std::make_pair(3, 8.0f),
                                                   std::make_pair(2, 7.0f),
                                                   std::make_pair(5, 9.0f)));
  EXPECT_THAT(calls_.zeros, ::testing::ElementsAre(std::make_pair(0, 2),
                                                   std::make_pair(4, 1)));
  EXPECT_TRUE(absl::IsInvalidArgument(exchange_->Ready(1, 2)));
  EXPECT_TRUE(absl::IsInvalidArgument(exchange_->Ready(3, 2)));
  ASSERT_TRUE(exchange_->FinishStep().ok());

  // A pull range the buffers do not hold (or none: the whole model).
  step.pull_ranges = {{1, 4}};
  EXPECT_TRUE(absl::IsInvalidArgument(exchange_->BeginStep(step)));
  step.pull_ranges = {};
  EXPECT_TRUE(absl::IsInvalidArgument(exchange_->BeginStep(step)));
  EXPECT_EQ(calls_.pulls.size(), 2u);
}

// Sync leases that name their contributors start the next version's pull
// ahead, into the stage's own buffers: the next step with the same range
// and buffers takes it instead of pulling, a step with other buffers (a
// role change) pulls afresh, and the state's range is pulled beside.
TEST_F(PsExchangeTest, PullAheadLandsInTheStagesBuffersAndIsUsedOnce) {
  calls_.start_pulls = true;
  std::vector<float> params(3, -1.0f), grads(3, 0.0f);
  const ExchangeBuffers stage = StageBuffers(params, grads);
  v1::NextTaskResponse lease;
  lease.set_step(4);
  lease.set_pull_version(4);
  v1::Contributor* c = lease.add_step_contributors();
  c->set_worker_id("w");
  c->set_num_samples(2);
  ExchangeStep step = ExchangeStep::Of(&lease, 1, 2);
  step.pull_ranges = {{2, 4}, {5, 6}};
  step.buffers = &stage;
  ASSERT_TRUE(exchange_->BeginStep(step).ok());
  // The state's range is started beside the parameters' pull; the pull
  // ahead of version 5 writes the parameters' range only.
  EXPECT_THAT(calls_.pulls, ::testing::ElementsAre(4));
  EXPECT_THAT(calls_.started_pulls, ::testing::ElementsAre(4, 5));
  EXPECT_THAT(params, ::testing::ElementsAre(2.5, 3.5, 5.5));

  // The next step, same range and buffers: its version comes from the pull
  // ahead (no new Pull); the state's range is started again.
  lease.set_step(5);
  lease.set_pull_version(5);
  ASSERT_TRUE(exchange_->BeginStep(step).ok());
  EXPECT_THAT(calls_.pulls, ::testing::ElementsAre(4));
  EXPECT_THAT(calls_.started_pulls, ::testing::ElementsAre(4, 5, 5, 6));

  // Other buffers (a role change): pulled afresh into them, and the pull
  // ahead goes there too; the old buffers are not written any more.
  std::vector<float> other(3, -1.0f), other_grads(3, 0.0f);
  const ExchangeBuffers moved = StageBuffers(other, other_grads);
  step.buffers = &moved;
  std::fill(params.begin(), params.end(), -7.0f);
  lease.set_step(6);
  lease.set_pull_version(6);
  ASSERT_TRUE(exchange_->BeginStep(step).ok());
  EXPECT_THAT(calls_.pulls, ::testing::ElementsAre(4, 6));
  EXPECT_THAT(other, ::testing::ElementsAre(2.5, 3.5, 5.5));
  EXPECT_THAT(params, ::testing::Each(-7.0f));
}

TEST_F(PsExchangeTest, StepWeightsComeRightAfterTheStepWhenPulledAhead) {
  calls_.start_pulls = true;
  auto* weights = exchange_->capability<StepWeightsExchange>();
  ASSERT_NE(weights, nullptr);
  v1::NextTaskResponse lease;
  lease.set_step(4);
  lease.set_pull_version(4);
  v1::Contributor* c = lease.add_step_contributors();
  c->set_worker_id("w");
  c->set_num_samples(2);
  ASSERT_TRUE(exchange_->BeginStep(ExchangeStep::Of(&lease, 1, 2)).ok());
  ASSERT_TRUE(exchange_->Ready(0, kN).ok());
  ASSERT_TRUE(exchange_->FinishStep().ok());
  EXPECT_THAT(calls_.started_pulls, ::testing::ElementsAre(5));
  EXPECT_TRUE(weights->AwaitStepWeights());  // version 5, pulled ahead
  EXPECT_TRUE(weights->AwaitStepWeights());  // still there, not pulled again

  // The next step's version is the one waited for: no new pull.
  lease.set_step(5);
  lease.set_pull_version(5);
  ASSERT_TRUE(exchange_->BeginStep(ExchangeStep::Of(&lease, 1, 2)).ok());
  EXPECT_THAT(calls_.pulls, ::testing::ElementsAre(4));
  ASSERT_TRUE(exchange_->Ready(0, kN).ok());
  ASSERT_TRUE(exchange_->FinishStep().ok());

  // A lease without contributors (the coordinator finalizes): nothing is
  // pulled ahead, the weights come with the next step.
  lease.clear_step_contributors();
  lease.set_step(6);
  lease.set_pull_version(6);
  ASSERT_TRUE(exchange_->BeginStep(ExchangeStep::Of(&lease, 1, 2)).ok());
  ASSERT_TRUE(exchange_->Ready(0, kN).ok());
  ASSERT_TRUE(exchange_->FinishStep().ok());
  EXPECT_FALSE(weights->AwaitStepWeights());
}

TEST_F(PsExchangeTest, AbandonCancelsThePushAndFailuresAreTold) {
  v1::NextTaskResponse lease;
  ExchangeStep step = ExchangeStep::Of(&lease, 1, 2);
  ASSERT_TRUE(exchange_->BeginStep(step).ok());
  exchange_->AbandonStep();
  EXPECT_EQ(calls_.destroyed_unfinished, 1);  // the shards apply nothing
  EXPECT_EQ(calls_.finished, 0);
  exchange_->AbandonStep();  // idempotent

  // A timeout while every shard answers was a wait for other workers.
  EXPECT_TRUE(exchange_->WaitedForOthers(absl::DeadlineExceededError("x")));
  calls_.shards = absl::UnavailableError("shard 1 cut off");
  EXPECT_FALSE(exchange_->WaitedForOthers(absl::DeadlineExceededError("x")));
  EXPECT_EQ(calls_.shard_checks, 2);
  EXPECT_FALSE(exchange_->WaitedForOthers(absl::UnavailableError("x")));
  EXPECT_EQ(calls_.shard_checks, 2);  // only timeouts are checked

  const ExchangePolicy policy = exchange_->policy();
  EXPECT_FALSE(policy.allow_empty_batch);
  EXPECT_FALSE(policy.fenced);
  EXPECT_FALSE(policy.report_failed_steps);
  EXPECT_EQ(policy.max_consecutive_failures, 10);
}

TEST_F(PsExchangeTest, DenseJobsHaveNoRows) {
  v1::NextTaskResponse lease;
  ASSERT_TRUE(exchange_->BeginStep(ExchangeStep::Of(&lease, 1, 2)).ok());
  EXPECT_FALSE(calls_.pushes[0].with_rows);
  // Without tables the exchange lacks the capability; it has zeros.
  GradientExchange& exchange = *exchange_;
  EXPECT_EQ(exchange.capability<EmbeddingRowExchange>(), nullptr);
  const absl::StatusOr<EmbeddingRowExchange*> rows =
      exchange.RequireCapability<EmbeddingRowExchange>();
  EXPECT_TRUE(absl::IsInvalidArgument(rows.status()));
  EXPECT_THAT(rows.status().message(), ::testing::HasSubstr("ps exchange"));
  EXPECT_EQ(exchange.capability<PartialBufferExchange>(),
            static_cast<PartialBufferExchange*>(exchange_.get()));
  EXPECT_EQ(exchange.capability<EndOfTrainingExchange>(), nullptr);
  EXPECT_EQ(exchange.capability<CommittedStepsObserver>(), nullptr);
}

TEST_F(PsExchangeTest, TablesReadRowsAtThePulledVersionAndPushThemWithTheStep) {
  PsExchange exchange(std::make_unique<RecordingClient>(&calls_, kN),
                      backend_.get(), buffers_, absl::Seconds(2),
                      /*embedding_tables=*/true);
  ASSERT_NE(exchange.embedding_rows(), nullptr);
  // No step open: rows cannot be pushed.
  EXPECT_TRUE(absl::IsFailedPrecondition(exchange.ReadyRows({})));

  v1::NextTaskResponse lease;
  lease.set_step(4);
  lease.set_pull_version(4);
  ASSERT_TRUE(exchange.BeginStep(ExchangeStep::Of(&lease, 1, 3)).ok());
  ASSERT_EQ(calls_.pushes.size(), 1u);
  EXPECT_TRUE(calls_.pushes[0].with_rows);

  const std::vector<uint64_t> ids0 = {7, 9}, ids2 = {1};
  const TableIds read[] = {{0, ids0}, {2, ids2}};
  std::vector<std::vector<float>> values;
  ASSERT_TRUE(exchange.embedding_rows()->Read(read, values).ok());
  // The client answered version 6 for a pull of 4: rows are read at 6.
  EXPECT_THAT(calls_.row_pulls, ::testing::ElementsAre(6));
  EXPECT_THAT(calls_.row_pull_tables, ::testing::ElementsAre(0, 2));
  EXPECT_EQ(values[0], (std::vector<float>{7, 7, 9, 9}));
  EXPECT_EQ(values[1], (std::vector<float>{201, 201}));

  SparseRows rows;
  rows.table = 2;
  rows.ids = {1};
  rows.grads = {0.5f, -0.5f};
  ASSERT_TRUE(exchange.ReadyRows({rows}).ok());
  ASSERT_TRUE(exchange.Ready(0, kN).ok());
  ASSERT_TRUE(exchange.FinishStep().ok());
  ASSERT_EQ(calls_.rows.size(), 1u);
  ASSERT_EQ(calls_.rows[0].size(), 1u);
  EXPECT_EQ(calls_.rows[0][0].table, 2);
  EXPECT_EQ(calls_.rows[0][0].grads, rows.grads);
}

TEST(MakeGradientExchangeTest, PicksTheModeOnce) {
  const std::vector<int> sizes = {4, 3, 2};
  const ParameterLayout layout = *MlpLayout(sizes);
  std::unique_ptr<ComputeBackend> backend = *MakeBackend(DeviceChoice::kCpu, 1);
  std::vector<float> params(layout.total_elements()),
      grads(layout.total_elements());
  v1::JobSpec job;
  job.set_job_id("job");
  job.set_bucket_elements(8);
  *job.mutable_optimizer() = ToProto(OptimizerConfig{});
  ExchangeContext context;
  context.job = &job;
  context.worker_id = "w";
  context.layout = &layout;
  context.backend = backend.get();
  context.buffers = HostBuffers(layout.total_elements(), params, grads);
  int clients = 0;
  ParameterClientFactory factory =
      [&clients](const v1::JobSpec&, const std::string&, const ParameterLayout&)
      -> absl::StatusOr<std::unique_ptr<ParameterClient>> {
    ++clients;
    return std::unique_ptr<ParameterClient>(
        std::make_unique<RecordingClient>(nullptr, kN));
  };

  // PS without shards: refused before anything is built.
  job.set_mode(v1::MODE_PS);
  EXPECT_TRUE(absl::IsFailedPrecondition(CheckExchangeJob(job)));
  EXPECT_TRUE(absl::IsFailedPrecondition(
      MakeGradientExchange(context, nullptr, factory).status()));
  job.add_shard_addresses("ps0:1");
  absl::StatusOr<std::unique_ptr<GradientExchange>> ps =
      MakeGradientExchange(context, nullptr, factory);
  ASSERT_TRUE(ps.ok()) << ps.status();
  EXPECT_EQ((*ps)->mode(), "ps");
  EXPECT_EQ(clients, 1);

  // Ring: needs the peer endpoint, never builds a PS client.
  job.set_mode(v1::MODE_RING);
  EXPECT_TRUE(absl::IsInvalidArgument(
      MakeGradientExchange(context, nullptr, factory).status()));
  testing::RingHubs hubs;
  testing::InMemoryPeerEndpoint peer(&hubs, "peer");
  absl::StatusOr<std::unique_ptr<GradientExchange>> ring =
      MakeGradientExchange(context, &peer, factory);
  ASSERT_TRUE(ring.ok()) << ring.status();
  EXPECT_EQ((*ring)->mode(), "ring");
  EXPECT_TRUE((*ring)->policy().fenced);
  EXPECT_TRUE((*ring)->policy().allow_empty_batch);
  EXPECT_EQ(clients, 1);
}

TEST(MakeGradientExchangeTest, ADlrmReadsRowsFromShardsOrItsOwnTables) {
  v1::JobSpec job;
  job.set_job_id("ctr");
  job.set_model_def(DlrmToJson(DlrmSpec{}));
  job.add_shard_addresses("ps0:1");
  *job.mutable_optimizer() = ToProto(OptimizerConfig{});
  *job.mutable_embedding() = ToProto(EmbeddingOptions{});
  const ParameterLayout layout = *DlrmParameterLayout(DlrmSpec{});
  std::unique_ptr<ComputeBackend> backend = *MakeBackend(DeviceChoice::kCpu, 1);
  std::vector<float> params(layout.total_elements()),
      grads(layout.total_elements());
  ExchangeContext context;
  context.job = &job;
  context.worker_id = "w";
  context.layout = &layout;
  context.backend = backend.get();
  context.buffers = HostBuffers(layout.total_elements(), params, grads);
  ParameterClientFactory factory = [](const v1::JobSpec&, const std::string&,
                                      const ParameterLayout&)
      -> absl::StatusOr<std::unique_ptr<ParameterClient>> {
    return std::unique_ptr<ParameterClient>(
        std::make_unique<RecordingClient>(nullptr, kN));
  };
  job.set_mode(v1::MODE_PS);
  auto ps = MakeGradientExchange(context, nullptr, factory);
  ASSERT_TRUE(ps.ok()) << ps.status();
  EmbeddingRowExchange* ps_rows = (*ps)->capability<EmbeddingRowExchange>();
  ASSERT_NE(ps_rows, nullptr);
  EXPECT_NE(ps_rows->embedding_rows(), nullptr);  // rows from the shards

  // Ring mode: the member's own tables (worker/ring_tables.h), read once a
  // step is open; rows declared outside a step are refused, not
  // unimplemented.
  testing::RingHubs hubs;
  testing::InMemoryPeerEndpoint peer(&hubs, "peer");
  job.set_mode(v1::MODE_RING);
  auto ring = MakeGradientExchange(context, &peer, factory);
  ASSERT_TRUE(ring.ok()) << ring.status();
  EmbeddingRowExchange* ring_rows = (*ring)->capability<EmbeddingRowExchange>();
  ASSERT_NE(ring_rows, nullptr);
  EXPECT_EQ(ring_rows->embedding_rows(), nullptr);
  EXPECT_TRUE(absl::IsFailedPrecondition(ring_rows->ReadyRows({})));
  // Full tables too large for one gradient buffer are refused.
  job.mutable_embedding()->set_ring_full_table_rows(int64_t{1} << 30);
  EXPECT_TRUE(absl::IsInvalidArgument(
      MakeGradientExchange(context, &peer, factory).status()));
}

TEST(MakeGradientExchangeTest, HybridSplitsTablesAndDenseLayers) {
  v1::JobSpec job;
  job.set_job_id("ctr");
  job.set_mode(v1::MODE_HYBRID);
  job.add_shard_addresses("ps0:1");
  *job.mutable_optimizer() = ToProto(OptimizerConfig{});
  const ParameterLayout layout = *DlrmParameterLayout(DlrmSpec{});
  std::unique_ptr<ComputeBackend> backend = *MakeBackend(DeviceChoice::kCpu, 1);
  std::vector<float> params(layout.total_elements()),
      grads(layout.total_elements());
  ExchangeContext context;
  context.job = &job;
  context.worker_id = "w";
  context.layout = &layout;
  context.backend = backend.get();
  context.buffers = HostBuffers(layout.total_elements(), params, grads);
  std::vector<int64_t> client_elements;
  ParameterClientFactory factory = [&client_elements](
                                       const v1::JobSpec&, const std::string&,
                                       const ParameterLayout& client_layout)
      -> absl::StatusOr<std::unique_ptr<ParameterClient>> {
    client_elements.push_back(client_layout.total_elements());
    return std::unique_ptr<ParameterClient>(
        std::make_unique<RecordingClient>(nullptr, 0));
  };
  testing::RingHubs hubs;
  testing::InMemoryPeerEndpoint peer(&hubs, "peer");

  // A dense model has no tables for hybrid's shards.
  job.set_model("784-16-10");
  auto dense = MakeGradientExchange(context, &peer, factory);
  EXPECT_TRUE(absl::IsInvalidArgument(dense.status())) << dense.status();
  EXPECT_THAT(dense.status().message(),
              ::testing::HasSubstr("embedding tables"));

  job.set_model_def(DlrmToJson(DlrmSpec{}));
  auto hybrid = MakeGradientExchange(context, &peer, factory);
  ASSERT_TRUE(hybrid.ok()) << hybrid.status();
  EXPECT_EQ((*hybrid)->mode(), "hybrid");
  EXPECT_TRUE((*hybrid)->policy().fenced);  // the ring's policy
  // The shards' client holds no dense element: they keep only rows.
  EXPECT_THAT(client_elements, ::testing::ElementsAre(0));
  // The ring needs the peer endpoint.
  EXPECT_TRUE(absl::IsInvalidArgument(
      MakeGradientExchange(context, nullptr, factory).status()));
}

}  // namespace
}  // namespace ferry

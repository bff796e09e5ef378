// HybridExchange over a one-member in-memory ring (the dense layers) and a
// recording ParameterClient (the shards' rows): what it pushes, when, and
// what a failure on either side leaves behind.
#include "worker/hybrid_exchange.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/recording_parameter_client.h"
#include "tests/worker/worker_test_fixture.h"

namespace ferry {
namespace {

using ::ferry::testing::Calls;
using ::testing::ElementsAre;

constexpr int64_t kN = 4;

class HybridExchangeTest : public ::testing::Test {
 protected:
  HybridExchangeTest() : backend_(*MakeBackend(DeviceChoice::kCpu, 1)) {
    RingExchangeOptions options;
    options.job_id = "job";
    options.worker_id = "w0";
    options.backend = backend_.get();
    options.connect = [this](const v1::NextTaskResponse& lease) {
      return hubs_.Connect(lease.ring_generation(), lease.ring_size(),
                           lease.rank());
    };
    options.tensor_sizes = {kN};
    options.bucket_elements = kN;
    options.optimizer.kind = OptimizerKind::kSgd;
    options.optimizer.lr = 0.5;
    options.params = params_.data();
    options.grads = grads_.data();
    options.host_grads = grads_.data();
    exchange_ = std::make_unique<HybridExchange>(
        *RingExchange::Create(std::move(options)),
        std::make_unique<testing::RecordingParameterClient>(&calls_, 0));
  }

  // A lease of a one-member ring for `step`, pulling version `step`.
  static v1::NextTaskResponse Lease(int64_t step, int64_t samples) {
    v1::NextTaskResponse lease;
    lease.set_step(step);
    lease.set_pull_version(step);
    lease.set_fence(1);
    lease.set_ring_generation(1);
    lease.set_rank(0);
    lease.set_step_samples(samples > 0 ? samples : 1);
    lease.add_ring()->set_worker_id("w0");
    return lease;
  }

  static std::vector<SparseRows> Rows() {
    SparseRows part;
    part.table = 3;
    part.ids = {7, 9};
    part.grads = {1, 1, 2, 2};
    return {part};
  }

  testing::RingHubs hubs_;
  Calls calls_;
  std::unique_ptr<ComputeBackend> backend_;
  std::vector<float> params_ = std::vector<float>(kN, 1.0f);
  std::vector<float> grads_ = std::vector<float>(kN, 0.0f);
  std::unique_ptr<HybridExchange> exchange_;
};

TEST_F(HybridExchangeTest, RowsGoToTheShardsAndTheDenseStepIsLocal) {
  const v1::NextTaskResponse lease = Lease(5, 2);
  ASSERT_TRUE(
      exchange_->BeginStep(ExchangeStep::Of(&lease, /*generation=*/4, 2)).ok());
  // Rows are read at the committed step's version.
  EmbeddingRowSource* rows = exchange_->embedding_rows();
  ASSERT_NE(rows, nullptr);
  std::vector<std::vector<float>> read;
  const std::vector<uint64_t> ids = {7};
  ASSERT_TRUE(rows->Read({TableIds{3, ids}}, read).ok());
  EXPECT_THAT(calls_.row_pulls, ElementsAre(5));
  EXPECT_THAT(read[0], ElementsAre(307.0f, 307.0f));

  ASSERT_TRUE(exchange_->ReadyRows(Rows()).ok());
  // The push opened and its rows sent at once, before the dense step ends.
  ASSERT_EQ(calls_.pushes.size(), 1u);
  const PushInfo& push = calls_.pushes[0];
  EXPECT_EQ(push.step, 5);
  EXPECT_EQ(push.generation, 4);
  EXPECT_EQ(push.num_samples, 2);
  EXPECT_EQ(push.base_version, 5);
  EXPECT_TRUE(push.with_rows);
  // Committed by FinishStep only, after the dense all-reduce.
  EXPECT_TRUE(push.commit_at_finish);
  EXPECT_TRUE(push.step_contributors.empty());  // the lease named none
  ASSERT_EQ(calls_.rows.size(), 1u);
  EXPECT_THAT(calls_.rows[0][0].ids, ElementsAre(7, 9));
  EXPECT_EQ(calls_.finished, 0);

  std::fill(grads_.begin(), grads_.end(), 4.0f);  // a sum over 2 samples
  ASSERT_TRUE(exchange_->Ready(0, kN).ok());
  ASSERT_TRUE(exchange_->FinishStep().ok());
  EXPECT_EQ(calls_.finished, 1);
  EXPECT_TRUE(calls_.ready.empty());  // no dense chunk went to the shards
  // SGD on the mean: 1 - 0.5 * 4 / 2.
  EXPECT_THAT(params_, ::testing::Each(0.0f));

  v1::StepReport report;
  ASSERT_TRUE(exchange_->AddToReport(report).ok());
  EXPECT_EQ(report.bytes().sent().at("ps"), 100);
}

TEST_F(HybridExchangeTest, AMemberWithoutSamplesPushesNothing) {
  const v1::NextTaskResponse lease = Lease(0, 0);
  ASSERT_TRUE(
      exchange_->BeginStep(ExchangeStep::Of(&lease, 1, /*num_samples=*/0))
          .ok());
  EXPECT_TRUE(absl::IsInvalidArgument(exchange_->ReadyRows(Rows())));
  EXPECT_TRUE(calls_.pushes.empty());
  exchange_->AbandonStep();

  ASSERT_TRUE(exchange_->BeginStep(ExchangeStep::Of(&lease, 1, 0)).ok());
  ASSERT_TRUE(exchange_->ReadyRows({}).ok());
  ASSERT_TRUE(exchange_->Ready(0, kN).ok());
  ASSERT_TRUE(exchange_->FinishStep().ok());
  EXPECT_TRUE(calls_.pushes.empty());
  EXPECT_THAT(params_, ::testing::Each(1.0f));  // zeros moved nothing
}

TEST_F(HybridExchangeTest, AFailedSideFailsTheStep) {
  const v1::NextTaskResponse lease = Lease(2, 2);
  // The dense side fails (a range never declared): the rows' push is
  // dropped unfinished, so the shards keep nothing of it.
  ASSERT_TRUE(exchange_->BeginStep(ExchangeStep::Of(&lease, 1, 2)).ok());
  ASSERT_TRUE(exchange_->ReadyRows(Rows()).ok());
  EXPECT_FALSE(exchange_->FinishStep().ok());
  EXPECT_EQ(calls_.finished, 0);
  EXPECT_EQ(calls_.destroyed_unfinished, 1);

  // The shards refuse the rows: the step fails with their status.
  calls_.finish = absl::AbortedError("stale generation");
  ASSERT_TRUE(exchange_->BeginStep(ExchangeStep::Of(&lease, 1, 2)).ok());
  ASSERT_TRUE(exchange_->ReadyRows(Rows()).ok());
  ASSERT_TRUE(exchange_->Ready(0, kN).ok());
  EXPECT_TRUE(absl::IsAborted(exchange_->FinishStep()));

  // Rows declared twice, or never.
  calls_.finish = absl::OkStatus();
  ASSERT_TRUE(exchange_->BeginStep(ExchangeStep::Of(&lease, 1, 2)).ok());
  ASSERT_TRUE(exchange_->ReadyRows(Rows()).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(exchange_->ReadyRows(Rows())));
  exchange_->AbandonStep();
  EXPECT_EQ(exchange_->embedding_rows(), nullptr);
  ASSERT_TRUE(exchange_->BeginStep(ExchangeStep::Of(&lease, 1, 2)).ok());
  ASSERT_TRUE(exchange_->Ready(0, kN).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(exchange_->FinishStep()));
  EXPECT_TRUE(absl::IsFailedPrecondition(exchange_->FinishStep()));
}

// The rows are the only capability: the ring's end-of-training gather and
// committed-step tracking stay inside (hybrid's committed steps are not
// final), and there are no partial buffers.
TEST_F(HybridExchangeTest, OffersTheRowsOnly) {
  GradientExchange& exchange = *exchange_;
  EXPECT_EQ(exchange.capability<EmbeddingRowExchange>(),
            static_cast<EmbeddingRowExchange*>(exchange_.get()));
  EXPECT_EQ(exchange.capability<PartialBufferExchange>(), nullptr);
  EXPECT_EQ(exchange.capability<EndOfTrainingExchange>(), nullptr);
  EXPECT_EQ(exchange.capability<CommittedStepsObserver>(), nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(
      exchange.RequireCapability<PartialBufferExchange>().status()));
}

}  // namespace
}  // namespace ferry

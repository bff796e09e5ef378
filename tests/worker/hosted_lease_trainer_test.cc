// HostedLeaseTrainer with a host thread: a lease goes to the host after
// BeginStep, the host's ranges reach the exchange as sums, the verdict
// comes back once the loop reported the step; a ring lease without samples
// never reaches the host; a PS step's weights reach the host before its
// Finish returns.
#include "worker/hosted_lease_trainer.h"

#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/model_spec.h"
#include "proto/job_convert.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;

// Records the calls; BeginStep writes `pulled` into the staging buffer
// (host_params) and, as GradientExchange's contract asks, params, which
// the host computes on; FinishStep fails when told to.
class RecordingExchange final : public GradientExchange,
                                public StepWeightsExchange,
                                public AbsentGradientExchange {
 public:
  explicit RecordingExchange(ExchangeBuffers buffers, bool allow_empty)
      : buffers_(buffers), allow_empty_(allow_empty) {}

  std::string mode() const override { return "recording"; }
  ExchangePolicy policy() const override {
    ExchangePolicy p;
    p.allow_empty_batch = allow_empty_;
    return p;
  }
  absl::Status BeginStep(const ExchangeStep& step) override {
    begun.push_back(step.num_samples);
    std::fill(buffers_.host_params,
              buffers_.host_params + buffers_.num_elements, pulled);
    std::fill(buffers_.params, buffers_.params + buffers_.num_elements, pulled);
    return absl::OkStatus();
  }
  absl::Status Ready(int64_t offset, int64_t length) override {
    ready.emplace_back(offset, length);
    sums.insert(sums.end(), buffers_.host_grads + offset,
                buffers_.host_grads + offset + length);
    return absl::OkStatus();
  }
  absl::Status ReadyAbsent(int64_t offset, int64_t length) override {
    absent.emplace_back(offset, length);
    return absl::OkStatus();
  }
  absl::Status FinishStep() override {
    ++finished;
    return finish_status;
  }
  bool AwaitStepWeights() override {
    std::fill(buffers_.host_params,
              buffers_.host_params + buffers_.num_elements,
              pulled + 1);  // the version the step made
    return step_weights;
  }
  void AbandonStep() override {}
  void CancelIfOlder(int64_t) override {}
  bool WaitedForOthers(const absl::Status&) override { return false; }
  void BetweenSteps() override {}
  absl::Status AddToReport(v1::StepReport&) override {
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<float>> FinalWeights() override {
    return std::vector<float>();
  }
  ExchangeBytes bytes() const override { return {}; }

  float pulled = 7.0f;
  bool step_weights = false;
  absl::Status finish_status;
  std::vector<int64_t> begun;
  std::vector<std::pair<int64_t, int64_t>> ready;
  std::vector<std::pair<int64_t, int64_t>> absent;  // ReadyAbsent
  bool offers_absent = false;  // has AbsentGradientExchange
  std::vector<float> sums;
  int finished = 0;

 protected:
  ExchangeCapability* FindCapability(std::string_view name) override {
    if (offers_absent) {
      if (ExchangeCapability* c = Offer<AbsentGradientExchange>(this, name)) {
        return c;
      }
    }
    return Offer<StepWeightsExchange>(this, name);
  }

 private:
  ExchangeBuffers buffers_;
  bool allow_empty_;
};

class HostedLeaseTrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    job_.set_mode(v1::MODE_PS);
    job_.set_seed(3);
    job_.set_global_batch(2);
    *job_.mutable_model() = "2-1";  // 0.weight [1, 2], 0.bias [1]
    absl::StatusOr<ParameterLayout> layout = MlpLayout({2, 1});
    ASSERT_TRUE(layout.ok());
    for (const TensorSlot& t : layout->tensors()) {
      v1::TensorSpec* spec = job_.add_tensors();
      spec->set_name(t.name);
      for (int64_t d : t.shape) spec->add_shape(d);
    }
    absl::StatusOr<std::shared_ptr<HostedBuffers>> buffers =
        HostedBuffers::ForJob(job_, "unused:0");
    ASSERT_TRUE(buffers.ok()) << buffers.status();
    buffers_ = *buffers;
    trainer_ = std::make_unique<HostedLeaseTrainer>(job_, buffers_, &channel_);
  }

  // A lease of epoch 0 positions [begin, end) of a 10-sample epoch.
  static v1::NextTaskResponse Lease(int64_t step, int64_t begin, int64_t end) {
    v1::NextTaskResponse lease;
    lease.set_action(v1::NextTaskResponse::TRAIN);
    lease.set_step(step);
    lease.set_epoch(0);
    lease.set_epoch_size(10);
    v1::DataTask* task = lease.add_tasks();
    task->set_epoch(0);
    task->set_begin(begin);
    task->set_end(end);
    return lease;
  }

  // Train(lease) on a loop thread; `result` gets what it returned.
  std::thread TrainOnLoop(RecordingExchange& exchange,
                          v1::NextTaskResponse lease,
                          absl::StatusOr<StepResult>& result) {
    return std::thread([this, &exchange, lease, &result] {
      result = trainer_->Train(lease, 1, exchange, *RealClock());
    });
  }

  v1::JobSpec job_;
  std::shared_ptr<HostedBuffers> buffers_;
  HostStepChannel channel_;
  std::unique_ptr<HostedLeaseTrainer> trainer_;
};

TEST_F(HostedLeaseTrainerTest, TheHostTrainsTheLeaseThroughTheExchange) {
  RecordingExchange exchange(buffers_->view, /*allow_empty=*/false);
  exchange.step_weights = true;
  const v1::NextTaskResponse lease = Lease(5, 2, 4);
  absl::StatusOr<StepResult> result;
  std::thread loop([&] {
    result = trainer_->Train(lease, 1, exchange, *RealClock());
    // The loop reports the step; only then does the host's Finish return.
    if (result.ok()) trainer_->StepReported();
  });
  absl::StatusOr<std::optional<HostLease>> got = channel_.NextLease(10);
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status();
  EXPECT_EQ((*got)->step, 5);
  EXPECT_EQ((*got)->samples.size(), 2u);
  // The pulled weights are the host's, the gradients zeroed.
  EXPECT_THAT(buffers_->params, ::testing::Each(7.0f));
  EXPECT_THAT(buffers_->grads, ::testing::Each(0.0f));
  // The host's batch-mean gradient, declared in two ranges.
  buffers_->grads = {0.5f, -1.0f, 0.25f};
  ASSERT_TRUE(channel_.Ready(2, 1).ok());
  ASSERT_TRUE(channel_.Ready(0, 2).ok());
  absl::StatusOr<bool> applied = channel_.Finish(3.0, 1);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_TRUE(*applied);
  // The step's weights were the host's before Finish returned.
  EXPECT_THAT(buffers_->params, ::testing::Each(8.0f));
  loop.join();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->samples, 2);
  EXPECT_DOUBLE_EQ(result->stats.loss_sum, 3.0);
  EXPECT_EQ(result->stats.correct, 1);
  EXPECT_THAT(exchange.begun, ElementsAre(2));
  EXPECT_THAT(exchange.ready,
              ElementsAre(std::make_pair(2, 1), std::make_pair(0, 2)));
  EXPECT_THAT(exchange.sums, ElementsAre(0.5f, 1.0f, -2.0f));  // x 2 samples
  EXPECT_EQ(exchange.finished, 1);
}

TEST_F(HostedLeaseTrainerTest, AFailedFinishTellsTheHostTheStepWasNotApplied) {
  RecordingExchange exchange(buffers_->view, /*allow_empty=*/false);
  exchange.finish_status = absl::AbortedError("a member was lost");
  absl::StatusOr<StepResult> result;
  std::thread loop = TrainOnLoop(exchange, Lease(1, 0, 2), result);
  ASSERT_TRUE(channel_.NextLease(10).ok());
  ASSERT_TRUE(channel_.Ready(0, 3).ok());
  absl::StatusOr<bool> applied = channel_.Finish(0, 0);
  loop.join();
  ASSERT_TRUE(applied.ok());
  EXPECT_FALSE(*applied);
  EXPECT_TRUE(absl::IsAborted(result.status())) << result.status();
}

TEST_F(HostedLeaseTrainerTest, ARangeOutsideTheModelFailsTheStep) {
  RecordingExchange exchange(buffers_->view, /*allow_empty=*/false);
  absl::StatusOr<StepResult> result;
  std::thread loop = TrainOnLoop(exchange, Lease(1, 0, 2), result);
  ASSERT_TRUE(channel_.NextLease(10).ok());
  ASSERT_TRUE(channel_.Ready(2, 5).ok());  // past the 3 elements
  absl::StatusOr<bool> applied = channel_.Finish(0, 0);
  loop.join();
  EXPECT_TRUE(absl::IsInvalidArgument(applied.status())) << applied.status();
  EXPECT_TRUE(absl::IsInvalidArgument(result.status())) << result.status();
  EXPECT_EQ(exchange.finished, 0);
}

TEST_F(HostedLeaseTrainerTest,
       ANonFiniteGradientRefusesTheStepNamingTheTensor) {
  RecordingExchange exchange(buffers_->view, /*allow_empty=*/false);
  absl::StatusOr<StepResult> result;
  std::thread loop = TrainOnLoop(exchange, Lease(1, 0, 2), result);
  ASSERT_TRUE(channel_.NextLease(10).ok());
  buffers_->grads = {0.5f, 1.0f, 0.25f};
  ASSERT_TRUE(channel_.Ready(2, 1).ok());  // fine: reaches the exchange
  buffers_->grads[1] = std::nanf("");
  ASSERT_TRUE(channel_.Ready(0, 2).ok());
  absl::StatusOr<bool> applied = channel_.Finish(0, 0);
  loop.join();
  ASSERT_TRUE(absl::IsInvalidArgument(applied.status())) << applied.status();
  EXPECT_THAT(std::string(applied.status().message()),
              ::testing::HasSubstr("0.weight[1]"));
  EXPECT_TRUE(absl::IsInvalidArgument(result.status()));
  EXPECT_THAT(exchange.ready, ElementsAre(std::make_pair(2, 1)));
  EXPECT_EQ(exchange.finished, 0);  // nothing committed
}

// A range the host declares absent (no sample used it: torch's .grad None)
// reaches an exchange that takes absent ranges as such, and others as
// zeros; one holding a gradient refuses the step.
TEST_F(HostedLeaseTrainerTest, AbsentRangesReachTheExchangeOnlyWhenZero) {
  buffers_->absent_allowed = true;  // a job whose model its workers define
  for (const bool offers : {true, false}) {
    RecordingExchange exchange(buffers_->view, /*allow_empty=*/false);
    exchange.offers_absent = offers;
    absl::StatusOr<StepResult> result;
    std::thread loop([&] {
      result = trainer_->Train(Lease(1, 0, 2), 1, exchange, *RealClock());
      if (result.ok()) trainer_->StepReported();  // Finish returns then
    });
    ASSERT_TRUE(channel_.NextLease(10).ok());
    buffers_->grads = {0.0f, 0.0f, 0.25f};
    ASSERT_TRUE(channel_.Ready(2, 1).ok());
    ASSERT_TRUE(channel_.Ready(0, 2, /*absent=*/true).ok());
    const absl::StatusOr<bool> applied = channel_.Finish(0, 0);
    loop.join();
    ASSERT_TRUE(applied.ok()) << applied.status();
    if (offers) {
      EXPECT_THAT(exchange.ready, ElementsAre(std::make_pair(2, 1)));
      EXPECT_THAT(exchange.absent, ElementsAre(std::make_pair(0, 2)));
    } else {
      EXPECT_THAT(exchange.ready,
                  ElementsAre(std::make_pair(2, 1), std::make_pair(0, 2)));
    }
    EXPECT_EQ(exchange.finished, 1);
  }
  RecordingExchange exchange(buffers_->view, /*allow_empty=*/false);
  exchange.offers_absent = true;
  absl::StatusOr<StepResult> result;
  std::thread loop = TrainOnLoop(exchange, Lease(2, 0, 2), result);
  ASSERT_TRUE(channel_.NextLease(10).ok());
  buffers_->grads = {0.0f, 0.5f, 0.25f};
  ASSERT_TRUE(channel_.Ready(0, 3, /*absent=*/true).ok());
  const absl::StatusOr<bool> applied = channel_.Finish(0, 0);
  loop.join();
  ASSERT_TRUE(absl::IsInvalidArgument(applied.status())) << applied.status();
  EXPECT_THAT(std::string(applied.status().message()),
              ::testing::HasSubstr("declared absent but element 1 holds"));
  EXPECT_TRUE(exchange.absent.empty());
  EXPECT_EQ(exchange.finished, 0);
  // In a job of a ferry model nothing may be absent.
  buffers_->absent_allowed = false;
  std::thread refused = TrainOnLoop(exchange, Lease(3, 0, 2), result);
  ASSERT_TRUE(channel_.NextLease(10).ok());
  buffers_->grads = {0.0f, 0.0f, 0.0f};
  ASSERT_TRUE(channel_.Ready(0, 3, /*absent=*/true).ok());
  const absl::StatusOr<bool> not_allowed = channel_.Finish(0, 0);
  refused.join();
  EXPECT_THAT(std::string(not_allowed.status().message()),
              ::testing::HasSubstr("only in a job whose model"));
  EXPECT_TRUE(exchange.absent.empty());
}

// A lease without samples (a ring member's) contributes zeros without the
// host; in a job whose model its workers define, an exchange that takes
// absent ranges gets every parameter absent.
TEST_F(HostedLeaseTrainerTest, ALeaseWithoutSamplesNeverReachesTheHost) {
  for (const bool allowed : {false, true}) {
    RecordingExchange exchange(buffers_->view, /*allow_empty=*/true);
    exchange.offers_absent = true;
    buffers_->absent_allowed = allowed;
    v1::NextTaskResponse empty = Lease(2, 0, 0);
    empty.clear_tasks();
    absl::StatusOr<StepResult> result;
    std::thread loop([&] {
      result = trainer_->Train(empty, 1, exchange, *RealClock());
      // The host is still waiting: the next lease is its.
      if (trainer_->Train(Lease(3, 0, 2), 1, exchange, *RealClock()).ok()) {
        trainer_->StepReported();
      }
    });
    absl::StatusOr<std::optional<HostLease>> got = channel_.NextLease(10);
    ASSERT_TRUE(got.ok() && got->has_value());
    EXPECT_EQ((*got)->step, 3);
    ASSERT_TRUE(channel_.Ready(0, 3).ok());
    ASSERT_TRUE(channel_.Finish(0, 0).ok());
    loop.join();
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->samples, 0);
    EXPECT_THAT(exchange.begun, ElementsAre(0, 2));
    EXPECT_EQ(exchange.finished, 2);
    if (allowed) {  // the empty lease's; then lease 3's gradient
      EXPECT_THAT(exchange.absent, ElementsAre(std::make_pair(0, 3)));
      EXPECT_THAT(exchange.ready, ElementsAre(std::make_pair(0, 3)));
    } else {
      EXPECT_TRUE(exchange.absent.empty());
      EXPECT_THAT(exchange.ready,
                  ElementsAre(std::make_pair(0, 3), std::make_pair(0, 3)));
    }
  }
}

TEST_F(HostedLeaseTrainerTest, TheHostLeavingCancelsTheStep) {
  RecordingExchange exchange(buffers_->view, /*allow_empty=*/false);
  absl::StatusOr<StepResult> result;
  std::thread loop = TrainOnLoop(exchange, Lease(1, 0, 2), result);
  channel_.Close();
  loop.join();
  EXPECT_TRUE(absl::IsCancelled(result.status())) << result.status();
}

}  // namespace
}  // namespace ferry

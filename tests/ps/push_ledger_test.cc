#include "ps/push_ledger.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

PsContribution Push(int64_t samples, std::vector<float> grad,
                    std::vector<PsContributor> step_set = {},
                    std::vector<FlatRange> absent = {}) {
  return PsContribution{
      samples, std::move(grad), {}, std::move(step_set), std::move(absent)};
}

// CheckSyncPush's code for `worker`'s push of `step` with `samples` while
// step `version` is open, at most `max_pushes` held.
absl::StatusCode SyncCode(const PushLedger& ledger, const std::string& worker,
                          int64_t step, int64_t samples, int64_t version,
                          int64_t max_pushes = 10) {
  return ledger.CheckSyncPush(worker, step, samples, version, max_pushes)
      .code();
}

constexpr absl::StatusCode kOk = absl::StatusCode::kOk;
constexpr absl::StatusCode kExists = absl::StatusCode::kAlreadyExists;
constexpr absl::StatusCode kPrecondition =
    absl::StatusCode::kFailedPrecondition;

TEST(PushLedgerTest, SyncPushMustBeOfTheOpenStepAndOnce) {
  PushLedger ledger(3);
  EXPECT_EQ(SyncCode(ledger, "w0", 5, 2, 5), kOk);
  EXPECT_EQ(SyncCode(ledger, "w0", 4, 2, 5), kPrecondition);
  EXPECT_EQ(SyncCode(ledger, "w0", 6, 2, 5), kPrecondition);
  ledger.Hold("w0", Push(2, {1.0f}));
  EXPECT_EQ(ledger.held(), 1);
  EXPECT_EQ(SyncCode(ledger, "w0", 5, 2, 5), kExists);
  EXPECT_EQ(SyncCode(ledger, "w1", 5, 2, 5, 1),
            absl::StatusCode::kResourceExhausted);
}

TEST(PushLedgerTest, RetryOfAnAppliedPushIsAlreadyExists) {
  PushLedger ledger(0);
  const std::vector<PsContributor> set = {{"w0", 2}, {"w1", 3}};
  ledger.RememberApplied(5, set);
  EXPECT_EQ(SyncCode(ledger, "w1", 5, 3, 6), kExists);
  // Other samples, or a worker not in the set: the step is just past.
  EXPECT_EQ(SyncCode(ledger, "w1", 5, 4, 6), kPrecondition);
  EXPECT_EQ(SyncCode(ledger, "w2", 5, 3, 6), kPrecondition);
}

TEST(PushLedgerTest, AsyncStepsAreOncePerWorkerWithinTheLimit) {
  PushLedger ledger(0);
  EXPECT_TRUE(ledger.CheckAsyncPush("w0", 1, 1).ok());
  ledger.RecordAsyncStep("w0", 1);
  EXPECT_EQ(ledger.CheckAsyncPush("w0", 1, 1).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(ledger.CheckAsyncPush("w0", 2, 1).ok());
  EXPECT_EQ(ledger.CheckAsyncPush("w1", 1, 1).code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(PushLedgerTest, StepCompleteNeedsEveryPushNamingTheSameSet) {
  PushLedger ledger(0);
  const std::vector<PsContributor> set = {{"w0", 2}, {"w1", 3}};
  ledger.Hold("w0", Push(2, {1.0f}, set));
  EXPECT_FALSE(ledger.StepComplete(set));
  ledger.Hold("w1", Push(3, {1.0f}, {{"w1", 3}}));
  EXPECT_FALSE(ledger.StepComplete(set));  // w1 named another set
  ledger.Hold("w1", Push(3, {1.0f}, set));
  EXPECT_TRUE(ledger.StepComplete(set));
}

TEST(PushLedgerTest, CheckHeldNamesTheFirstMismatch) {
  PushLedger ledger(7);
  ledger.Hold("w0", Push(2, {1.0f}));
  EXPECT_TRUE(ledger.CheckHeld(4, {{"w0", 2}}).ok());
  absl::Status missing = ledger.CheckHeld(4, {{"w0", 2}, {"w1", 1}});
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(missing.message(), HasSubstr("w1 has not pushed step 4"));
  EXPECT_EQ(ledger.CheckHeld(4, {{"w0", 3}}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PushLedgerTest, CheckAppliedOverComparesSetsInAnyOrder) {
  PushLedger ledger(0);
  EXPECT_TRUE(ledger.CheckAppliedOver(1, {{"w0", 1}}).ok());  // not known
  ledger.RememberApplied(1, {{"w0", 1}, {"w1", 1}});
  EXPECT_TRUE(ledger.CheckAppliedOver(1, {{"w1", 1}, {"w0", 1}}).ok());
  EXPECT_EQ(ledger.CheckAppliedOver(1, {{"w0", 1}}).code(),
            absl::StatusCode::kAlreadyExists);
}

TEST(PushLedgerTest, SumInOrderAddsIntoTheFirstBuffer) {
  PushLedger ledger(0);
  ledger.Hold("w0", Push(1, {1.0f, 2.0f}));
  ledger.Hold("w1", Push(1, {10.0f, 20.0f}));
  ledger.Hold("w2", Push(1, {100.0f, 200.0f}));
  std::vector<float>& sum = ledger.SumInOrder({{"w1", 1}, {"w2", 1}}, 4.0f);
  EXPECT_THAT(sum, ElementsAre(27.5f, 55.0f));
  // The sum is w1's buffer: the pushes are spent.
  GradBufferPool pool(2);
  ledger.DropHeld(pool);
  EXPECT_EQ(ledger.held(), 0);
  EXPECT_EQ(pool.free_buffers(), 3u);
}

// Summed in the order named and then divided, rounded as those
// operations are (the last addition and the division share a pass).
TEST(PushLedgerTest, SumInOrderRoundsAsASumThenADivision) {
  const std::vector<float> a = {0.1f, 1e8f, 3.0f}, b = {0.2f, 1.0f, -1e-3f},
                           c = {0.3f, -1e8f, 7.0f};
  for (int k = 1; k <= 3; ++k) {
    PushLedger ledger(0);
    ledger.Hold("a", Push(1, a));
    ledger.Hold("b", Push(1, b));
    ledger.Hold("c", Push(1, c));
    std::vector<PsContributor> order = {{"c", 1}, {"a", 1}, {"b", 1}};
    order.resize(k);
    const std::vector<float>& sum = ledger.SumInOrder(order, 3.0f);
    for (size_t i = 0; i < a.size(); ++i) {
      float expected = c[i];
      if (k > 1) expected += a[i];
      if (k > 2) expected += b[i];
      EXPECT_EQ(sum[i], expected / 3.0f) << k << " " << i;
    }
  }
}

TEST(PushLedgerTest, AbsentInAllIsWhatEveryContributorLeftOut) {
  PushLedger ledger(0);
  ledger.Hold("w0", Push(1, {0, 0, 0, 0, 0, 0}, {}, {{0, 2}, {3, 6}}));
  ledger.Hold("w1", Push(1, {0, 0, 0, 0, 0, 0}, {}, {{1, 4}}));
  ledger.Hold("w2", Push(1, {1, 1, 1, 1, 1, 1}));  // used everything
  EXPECT_EQ(ledger.AbsentInAll({{"w0", 1}, {"w1", 1}}),
            (std::vector<FlatRange>{{1, 2}, {3, 4}}));
  EXPECT_EQ(ledger.AbsentInAll({{"w0", 1}}),
            (std::vector<FlatRange>{{0, 2}, {3, 6}}));
  EXPECT_TRUE(ledger.AbsentInAll({{"w0", 1}, {"w1", 1}, {"w2", 1}}).empty());
  EXPECT_TRUE(ledger.AbsentInAll({{"w0", 1}, {"gone", 1}}).empty());
}

TEST(PushLedgerTest, RemembersOnlyTheLastSteps) {
  PushLedger ledger(0);
  for (int64_t step = 0; step <= PushLedger::kRememberedSteps; ++step) {
    ledger.RememberApplied(step, {{"w0", 1}});
  }
  // Step 0 is forgotten: a retry of it is just too old.
  EXPECT_EQ(SyncCode(ledger, "w0", 0, 1, 100), kPrecondition);
  EXPECT_EQ(SyncCode(ledger, "w0", 1, 1, 100), kExists);
}

TEST(PushLedgerTest, RollBackForgetsStepsAtOrAfterTheVersion) {
  PushLedger ledger(0);
  ledger.RememberApplied(3, {{"w0", 1}});
  ledger.RememberApplied(4, {{"w0", 1}});
  ledger.RecordAsyncStep("w9", 8);
  ledger.Hold("w1", Push(1, {1.0f}));
  GradBufferPool pool(1);
  ledger.RollBack(4, pool);
  EXPECT_EQ(ledger.held(), 0);
  EXPECT_EQ(pool.free_buffers(), 1u);
  EXPECT_EQ(SyncCode(ledger, "w0", 3, 1, 4), kExists);
  EXPECT_EQ(SyncCode(ledger, "w0", 4, 1, 4), kOk);
  EXPECT_TRUE(ledger.CheckAsyncPush("w9", 8, 10).ok());
}

}  // namespace
}  // namespace ferry

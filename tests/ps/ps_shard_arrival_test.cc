// Sum on arrival (PsShardConfig.sum_on_arrival, ps/arrival_sum.h): a sync
// shard sums each pushed chunk into one buffer as it arrives, so a step is
// applied over exactly the workers it summed.
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps/arrival_sum.h"
#include "ps/ps_shard.h"
#include "tests/ps/ps_shard_testing.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The shard of ps_shard_testing.h's chunks: owned chunks 2 ([4,5)), 3
// ([5,7)) and 4 ([7,8)).
ArrivalSum TestSum() {
  return ArrivalSum(
      {{2, 0, 4, 4, 1, 1}, {3, 1, 0, 5, 2, 1}, {4, 1, 2, 7, 1, 1}}, 4, 4);
}

TEST(ArrivalSumTest, TheFirstContributionIsCopiedAndLaterOnesAdded) {
  ArrivalSum sum = TestSum();
  sum.Reset(0);
  const std::vector<float> a = {1, 2}, b = {10, 20};
  EXPECT_TRUE(*sum.Add("a", 3, 1, a));
  EXPECT_TRUE(*sum.Add("b", 5, 1, b));
  EXPECT_EQ(sum.sum()[1], 11);
  EXPECT_EQ(sum.sum()[2], 22);
}

TEST(ArrivalSumTest, ARetriedChunkIsSkippedAndAnotherSampleCountRefused) {
  ArrivalSum sum = TestSum();
  sum.Reset(0);
  const std::vector<float> a = {1, 2}, again = {7, 7};
  ASSERT_TRUE(*sum.Add("a", 3, 1, a));
  EXPECT_FALSE(*sum.Add("a", 3, 1, again));  // a retry: summed once
  EXPECT_EQ(sum.sum()[1], 1);
  auto other = sum.Add("a", 4, 1, again);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(other.status().message(), HasSubstr("3 samples"));
  EXPECT_EQ(sum.Add("a", 3, 3, a).status().code(),
            absl::StatusCode::kInvalidArgument);  // no owned chunk 3
  EXPECT_EQ(sum.Add("a", 3, 0, a).status().code(),
            absl::StatusCode::kInvalidArgument);  // chunk 2 holds 1 float
  EXPECT_EQ(sum.sum()[1], 1);
}

TEST(ArrivalSumTest, OnlyExactlyTheWorkersSummedWholeMakeTheStep) {
  ArrivalSum sum = TestSum();
  sum.Reset(4);
  const std::vector<float> one = {1}, two = {1, 1};
  for (const std::string w : {"a", "b"}) {
    ASSERT_TRUE(*sum.Add(w, 2, 0, one));
    ASSERT_TRUE(*sum.Add(w, 2, 1, two));
  }
  ASSERT_TRUE(*sum.Add("a", 2, 2, one));
  // b's chunk 4 is missing.
  EXPECT_THAT(sum.CheckSummedExactly("s", {{"a", 2}, {"b", 2}}).message(),
              HasSubstr("b's push was not summed whole (2 of 3"));
  ASSERT_TRUE(*sum.Add("b", 2, 2, one));
  EXPECT_TRUE(sum.CheckSummedExactly("s", {{"a", 2}, {"b", 2}}).ok());
  // b cannot be taken out, nor counted with other samples.
  EXPECT_THAT(sum.CheckSummedExactly("s", {{"a", 2}}).message(),
              HasSubstr("chunks of worker b were summed on arrival"));
  EXPECT_THAT(sum.CheckSummedExactly("s", {{"a", 2}, {"b", 3}}).message(),
              HasSubstr("summed with 2 samples, the set says 3"));
  // A reset forgets them all: the next step's first contribution is copied.
  sum.Reset(5);
  EXPECT_EQ(sum.step(), 5);
  EXPECT_THAT(sum.CheckSummedExactly("s", {{"a", 2}}).message(),
              HasSubstr("a's push was not summed whole (0 of 3"));
  const std::vector<float> seven = {7};
  ASSERT_TRUE(*sum.Add("c", 1, 0, seven));
  EXPECT_EQ(sum.sum()[0], 7);
}

PsShardConfig ArrivalConfig() {
  PsShardConfig config = TestConfig();
  config.sum_on_arrival = true;
  return config;
}

PsPushHeader SetHeader(const std::string& worker,
                       std::vector<PsContributor> set) {
  PsPushHeader h = Header(worker, 0, 1);
  h.step_contributors = std::move(set);
  return h;
}

TEST(PsShardArrivalTest, AStepEqualsTheShardThatKeepsABufferPerPush) {
  auto arrival = MakeShard(ArrivalConfig());
  auto buffered = MakeShard(TestConfig());
  for (PsShard* shard : {arrival.get(), buffered.get()}) {
    // Two contributions: their float sum is the same in either order.
    ASSERT_TRUE(PushSlice(*shard, Header("a", 0, 1), {1, 2, 3, 4}).ok());
    ASSERT_TRUE(PushSlice(*shard, Header("b", 0, 3), {0.5, 0.25, 7, 9}).ok());
    ASSERT_TRUE(shard->FinalizeStep("job", 0, {{"a", 1}, {"b", 3}}, 0).ok());
  }
  EXPECT_EQ(Params(*arrival), Params(*buffered));
  EXPECT_EQ(arrival->version(), 1);
}

TEST(PsShardArrivalTest, TheLastPushOfANamedSetAppliesTheStep) {
  auto shard = MakeShard(ArrivalConfig());
  const std::vector<PsContributor> set = {{"a", 1}, {"b", 1}};
  ASSERT_EQ(*PushSlice(*shard, SetHeader("a", set), {2, 2, 2, 2}), 0);
  ASSERT_EQ(*PushSlice(*shard, SetHeader("b", set), {4, 4, 4, 4}), 1);
  // Mean 3, lr 0.5.
  EXPECT_THAT(Params(*shard), ElementsAre(-0.5f, 0.5f, 1.5f, 2.5f));
  // The next step sums afresh into the same buffer.
  PsPushHeader h = SetHeader("a", set);
  h.step = 1;
  ASSERT_TRUE(PushSlice(*shard, h, {2, 2, 2, 2}).ok());
  h.worker_id = "b";
  ASSERT_EQ(*PushSlice(*shard, h, {2, 2, 2, 2}), 2);
  EXPECT_THAT(Params(*shard), ElementsAre(-1.5f, -0.5f, 0.5f, 1.5f));
}

TEST(PsShardArrivalTest, AFinalizeWithoutAWorkerItSummedIsRefused) {
  auto shard = MakeShard(ArrivalConfig());
  ASSERT_TRUE(PushSlice(*shard, Header("a", 0, 1), {2, 2, 2, 2}).ok());
  ASSERT_TRUE(PushSlice(*shard, Header("b", 0, 1), {4, 4, 4, 4}).ok());
  auto refused = shard->FinalizeStep("job", 0, {{"a", 1}}, 0);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("chunks of worker b were summed on arrival"));
  EXPECT_EQ(shard->version(), 0);
  EXPECT_THAT(Params(*shard), ElementsAre(1.0f, 2.0f, 3.0f, 4.0f));
  // The coordinator forms the step again: a rollback drops the sum.
  ASSERT_TRUE(shard->RollBackOpenStep(0, 1).ok());
  ASSERT_TRUE(PushSlice(*shard, Header("a", 0, 1, 1), {2, 2, 2, 2}).ok());
  ASSERT_TRUE(shard->FinalizeStep("job", 0, {{"a", 1}}, 1).ok());
  EXPECT_THAT(Params(*shard), ElementsAre(0.0f, 1.0f, 2.0f, 3.0f));
}

TEST(PsShardArrivalTest, APushBrokenHalfwayIsCompletedByItsRetryOnce) {
  auto shard = MakeShard(ArrivalConfig());
  {
    auto broken = shard->BeginPush(Header("a", 0, 1));
    ASSERT_TRUE(broken.ok());
    const std::vector<float> c2 = {2}, c3 = {4, 6};
    ASSERT_TRUE(shard->AddChunk(**broken, 2, c2).ok());
    ASSERT_TRUE(shard->AddChunk(**broken, 3, c3).ok());
  }  // the stream broke: never committed
  // The retry sends every chunk again; chunks 2 and 3 count once.
  ASSERT_TRUE(PushSlice(*shard, Header("a", 0, 1), {2, 4, 6, 8}).ok());
  ASSERT_TRUE(shard->FinalizeStep("job", 0, {{"a", 1}}, 0).ok());
  EXPECT_THAT(Params(*shard), ElementsAre(0.0f, 0.0f, 0.0f, 0.0f));
}

TEST(PsShardArrivalTest, ABadChunkIsRefusedAndAppliesNothing) {
  auto shard = MakeShard(ArrivalConfig());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto bad = PushSlice(*shard, Header("a", 0, 1), {2, nan, 6, 8});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("not finite"));
  // Chunk 2 was summed before chunk 3 failed: the step cannot be applied
  // over a's push as it stands, nor without it.
  EXPECT_FALSE(shard->FinalizeStep("job", 0, {{"a", 1}}, 0).ok());
  EXPECT_EQ(shard->version(), 0);
  EXPECT_THAT(Params(*shard), ElementsAre(1.0f, 2.0f, 3.0f, 4.0f));
}

TEST(PsShardArrivalTest, ARollbackAbortsAPushBeingReceived) {
  auto shard = MakeShard(ArrivalConfig());
  auto staging = shard->BeginPush(Header("a", 0, 1));
  ASSERT_TRUE(staging.ok());
  const std::vector<float> c2 = {100};
  ASSERT_TRUE(shard->AddChunk(**staging, 2, c2).ok());
  ASSERT_TRUE(shard->RollBackOpenStep(0, 1).ok());
  const std::vector<float> c3 = {100, 100};
  EXPECT_EQ(shard->AddChunk(**staging, 3, c3).code(),
            absl::StatusCode::kAborted);
  // The new attempt's push alone is summed.
  ASSERT_TRUE(PushSlice(*shard, Header("a", 0, 1, 1), {2, 4, 6, 8}).ok());
  ASSERT_TRUE(shard->FinalizeStep("job", 0, {{"a", 1}}, 1).ok());
  EXPECT_THAT(Params(*shard), ElementsAre(0.0f, 0.0f, 0.0f, 0.0f));
}

TEST(PsShardArrivalTest, ConcurrentPushesSumEveryChunkOnce) {
  // Eight workers push chunk by chunk at once; integer-valued gradients
  // sum exactly in any order.
  auto shard = MakeShard(ArrivalConfig());
  constexpr int kWorkers = 8, kSteps = 20;
  std::vector<PsContributor> set;
  for (int w = 0; w < kWorkers; ++w)
    set.push_back({"w" + std::to_string(w), 1});
  for (int step = 0; step < kSteps; ++step) {
    std::vector<std::thread> pushers;
    for (int w = 0; w < kWorkers; ++w) {
      pushers.emplace_back([&, w] {
        PsPushHeader h = Header(set[w].worker_id, step, 1);
        h.step_contributors = set;
        const float g = static_cast<float>(w + 1);
        EXPECT_TRUE(PushSlice(*shard, h, {g, g, g, g}).ok());
      });
    }
    for (std::thread& t : pushers) t.join();
    ASSERT_EQ(shard->version(), step + 1);
  }
  // Each step: mean 4.5, lr 0.5 -> 2.25 off every value.
  const float off = 2.25f * kSteps;
  EXPECT_THAT(Params(*shard),
              ElementsAre(1.0f - off, 2.0f - off, 3.0f - off, 4.0f - off));
}

}  // namespace
}  // namespace ferry

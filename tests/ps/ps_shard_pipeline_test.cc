// A pipeline stage pushes its layers' gradient of its replica's samples,
// which another stage of the replica counts: a sync push may sum no samples
// of its own, and a step's set may name it with 0, as long as the set has
// samples. Async pushes still need one.
#include <vector>

#include "gtest/gtest.h"
#include "ps/ps_shard.h"
#include "tests/ps/ps_shard_testing.h"

namespace ferry {
namespace {

TEST(PsShardPipelineTest, AStageWithoutSamplesOfItsOwnIsAContributor) {
  auto on_push = MakeShard(TestConfig());
  auto by_coordinator = MakeShard(TestConfig());
  // "b" holds the replica's 4 samples, "a" none: the mean is the sum / 4.
  const std::vector<PsContributor> set = {{"a", 0}, {"b", 4}};
  const std::vector<float> a = {4, 0, 8, 0}, b = {0, 4, 0, 8};
  PsPushHeader ha = Header("a", 0, 0), hb = Header("b", 0, 4);
  ASSERT_EQ(*PushSlice(*by_coordinator, ha, a), 0);
  ASSERT_EQ(*PushSlice(*by_coordinator, hb, b), 0);
  ASSERT_TRUE(by_coordinator->FinalizeStep("job", 0, set, 0).ok());
  ha.step_contributors = hb.step_contributors = set;
  ASSERT_EQ(*PushSlice(*on_push, ha, a), 0);
  ASSERT_EQ(*PushSlice(*on_push, hb, b), 1);  // applied on the last push
  EXPECT_EQ(Params(*on_push), Params(*by_coordinator));
  EXPECT_NE(Params(*on_push), Params(*MakeShard(TestConfig())));

  // A set without samples, a negative count, an async push without
  // samples: refused, nothing applied.
  PsPushHeader empty = Header("a", 1, 0, 1);
  empty.step_contributors = {{"a", 0}, {"b", 0}};
  EXPECT_EQ(PushSlice(*on_push, empty, a).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(on_push->FinalizeStep("job", 1, {{"a", 0}}, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PushSlice(*on_push, Header("a", 1, -1, 1), a).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(on_push->version(), 1);
  auto async = MakeShard(TestConfig(PsConsistency::kAsync));
  EXPECT_EQ(PushSlice(*async, Header("a", 0, 0), a).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ferry

// A push's absent ranges (PushRequest.absent): the parameters that no
// sample of a step used, which the shard's optimizer skips when every
// contributor left them out.
#include <map>
#include <string>
#include <vector>

#include "common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps/ps_shard.h"
#include "ps_shard_testing.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

// TestConfig with momentum and weight decay (so a zero gradient still moves
// a parameter) and the model's last element (flat 7, chunk 4) as state.
PsShardConfig AbsentConfig(PsConsistency consistency = PsConsistency::kSync,
                           bool on_arrival = false) {
  PsShardConfig config = TestConfig(consistency);
  config.optimizer.kind = OptimizerKind::kMomentum;
  config.optimizer.momentum = 0.9;
  config.optimizer.weight_decay = 0.1;
  config.state_elements = 1;
  config.sum_on_arrival = on_arrival;
  return config;
}

// PushSlice with each chunk's absent (begin, end) pairs.
absl::StatusOr<int64_t> PushAbsent(
    PsShard& shard, const PsPushHeader& header, const std::vector<float>& g,
    const std::map<int32_t, std::vector<int64_t>>& absent) {
  auto staging = shard.BeginPush(header);
  if (!staging.ok()) return staging.status();
  const struct {
    int32_t id;
    size_t at, length;
  } chunks[] = {{2, 0, 1}, {3, 1, 2}, {4, 3, 1}};
  for (const auto& c : chunks) {
    const absl::string_view bytes(reinterpret_cast<const char*>(&g[c.at]),
                                  c.length * sizeof(float));
    auto found = absent.find(c.id);
    RETURN_IF_ERROR(shard.AddChunk(
        **staging, c.id, GradientEncoding::kFp32,
        absl::MakeConstSpan(&bytes, 1),
        found == absent.end() ? absl::Span<const int64_t>() : found->second));
  }
  return shard.CommitPush(*std::move(staging));
}

class PsShardAbsentTest : public ::testing::TestWithParam<bool> {};

// a leaves out flat 4, 5 and 6; b only flat 6: the step skips flat 6
// alone, and updates the rest as a shard without absent ranges does.
TEST_P(PsShardAbsentTest, SyncStepSkipsWhatEveryContributorLeftOut) {
  auto shard = MakeShard(AbsentConfig(PsConsistency::kSync, GetParam()));
  auto plain = MakeShard(AbsentConfig(PsConsistency::kSync, GetParam()));
  const std::vector<float> a = {0, 0, 0, 2}, b = {3, 1, 0, 4};
  ASSERT_TRUE(PushAbsent(*shard, ferry::Header("a", 0, 1), a,
                         {{2, {0, 1}}, {3, {0, 2}}})
                  .ok());
  ASSERT_TRUE(
      PushAbsent(*shard, ferry::Header("b", 0, 1), b, {{3, {1, 2}}}).ok());
  ASSERT_TRUE(shard->FinalizeStep("job", 0, {{"a", 1}, {"b", 1}}, 0).ok());
  ASSERT_TRUE(PushSlice(*plain, ferry::Header("a", 0, 1), a).ok());
  ASSERT_TRUE(PushSlice(*plain, ferry::Header("b", 0, 1), b).ok());
  ASSERT_TRUE(plain->FinalizeStep("job", 0, {{"a", 1}, {"b", 1}}, 0).ok());
  const std::vector<float> got = Params(*shard), want = Params(*plain);
  EXPECT_EQ(got[0], want[0]);
  EXPECT_EQ(got[1], want[1]);
  EXPECT_EQ(got[2], 3.0f);  // skipped: no decay, no momentum
  EXPECT_NE(want[2], 3.0f);
  EXPECT_EQ(got[3], want[3]);  // the state moves by its mean change
  EXPECT_EQ(shard->version(), 1);

  // Next step nobody leaves anything out: flat 6 starts its momentum now,
  // so it moves as a fresh element would (decay only, lr 0.5).
  ASSERT_TRUE(
      PushAbsent(*shard, ferry::Header("a", 1, 1), {0, 0, 0, 0}, {}).ok());
  ASSERT_TRUE(shard->FinalizeStep("job", 1, {{"a", 1}}, 0).ok());
  EXPECT_FLOAT_EQ(Params(*shard)[2], 3.0f - 0.5f * 0.1f * 3.0f);
}

INSTANTIATE_TEST_SUITE_P(SumOnArrival, PsShardAbsentTest, ::testing::Bool());

TEST(PsShardAbsentOnlyTest, AsyncPushSkipsWhatItLeftOut) {
  PsShardConfig config = AbsentConfig(PsConsistency::kAsync);
  config.global_batch = 1;
  auto shard = MakeShard(config);
  ASSERT_TRUE(
      PushAbsent(*shard, ferry::Header("a", 0, 1), {0, 1, 1, 0}, {{2, {0, 1}}})
          .ok());
  EXPECT_EQ(Params(*shard)[0], 1.0f);
  EXPECT_NE(Params(*shard)[1], 2.0f);
}

TEST(PsShardAbsentOnlyTest, MalformedAbsentRangesRefuseThePush) {
  auto shard = MakeShard(AbsentConfig());
  const std::vector<float> g = {0, 0, 1, 0};
  const struct {
    std::map<int32_t, std::vector<int64_t>> absent;
    const char* says;
  } cases[] = {
      {{{3, {0}}}, "not pairs"},
      {{{3, {0, 3}}}, "outside [0, 2)"},
      {{{3, {1, 1}}}, "empty"},
      {{{3, {0, 1, 1, 2}}}, "not after"},
      {{{3, {1, 2}}}, "holds 1"},              // a gradient is there
      {{{4, {0, 1}}}, "non-trainable state"},  // flat 7 is state
  };
  int64_t rejected = shard->Info().rejected_pushes;
  for (const auto& c : cases) {
    const absl::Status s =
        PushAbsent(*shard, ferry::Header("a", 0, 1), g, c.absent).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.says;
    EXPECT_THAT(s.message(), HasSubstr(c.says));
    EXPECT_EQ(shard->Info().rejected_pushes, ++rejected);
  }
  EXPECT_EQ(shard->FinalizeStep("job", 0, {{"a", 1}}, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(shard->version(), 0);
}

}  // namespace
}  // namespace ferry

// An async push's chunks are divided by its samples as they land (PsShard::
// AddChunk): every way a chunk can land is divided exactly once, and the
// checks on a chunk see its values as pushed.
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/gradient_codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps/ps_shard.h"
#include "ps_shard_testing.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

PsShardConfig AsyncConfig() {
  PsShardConfig config = TestConfig(PsConsistency::kAsync);
  config.global_batch = 3;
  return config;
}

// fp16-exact values, none of them a multiple of 3: the division rounds.
const std::vector<float> kGrad = {0.75f, -1.25f, 2.5f, 0.0f};

// The slice's chunks: chunk 2 fp16-encoded, chunk 3 in two pieces that
// split a float, chunk 4 (zeros) as ENCODING_ZEROS.
absl::StatusOr<int64_t> PushEveryWay(PsShard& shard,
                                     const PsPushHeader& header) {
  auto staging = shard.BeginPush(header);
  if (!staging.ok()) return staging.status();
  std::string fp16;
  Encode(GradientEncoding::kFp16, &kGrad[0], 1, 0, &fp16);
  const absl::string_view encoded(fp16);
  absl::Status s = shard.AddChunk(**staging, 2, GradientEncoding::kFp16,
                                  absl::MakeConstSpan(&encoded, 1));
  if (!s.ok()) return s;
  char bytes[2 * sizeof(float)];
  std::memcpy(bytes, &kGrad[1], sizeof(bytes));
  const absl::string_view pieces[2] = {absl::string_view(bytes, 3),
                                       absl::string_view(bytes + 3, 5)};
  s = shard.AddChunk(**staging, 3, GradientEncoding::kFp32, pieces);
  if (!s.ok()) return s;
  s = shard.AddChunk(**staging, 4, GradientEncoding::kZeros,
                     absl::Span<const absl::string_view>());
  if (!s.ok()) return s;
  return shard.CommitPush(*std::move(staging));
}

TEST(PsShardAsyncDivisionTest, EveryWayAChunkLandsIsDividedOnce) {
  auto plain = MakeShard(AsyncConfig());
  auto mixed = MakeShard(AsyncConfig());
  ASSERT_TRUE(PushSlice(*plain, Header("a", 0, 3), kGrad).ok());
  auto version = PushEveryWay(*mixed, Header("a", 0, 3));
  ASSERT_TRUE(version.ok()) << version.status();
  const std::vector<float> want = Params(*plain), got = Params(*mixed);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << i;
  // SGD at lr 0.5 with the push's 3 of 3 samples: p - 0.5 * g / 3.
  const std::vector<float> initial = AsyncConfig().initial_slice;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_FLOAT_EQ(want[i], initial[i] - 0.5f * (kGrad[i] / 3.0f)) << i;
  }
  EXPECT_EQ(want[3], initial[3]);
}

// A subnormal in an absent range is refused although half of it rounds to
// zero, and a non-finite value is named as it was pushed; neither push
// changes anything.
TEST(PsShardAsyncDivisionTest, ChecksSeeTheValuesAsPushed) {
  PsShardConfig config = AsyncConfig();
  config.optimizer.kind = OptimizerKind::kMomentum;
  config.optimizer.momentum = 0.9;
  auto shard = MakeShard(config);
  const float tiny = std::numeric_limits<float>::denorm_min();
  ASSERT_EQ(tiny / 2.0f, 0.0f);
  auto staging = shard->BeginPush(Header("a", 0, 2));
  ASSERT_TRUE(staging.ok());
  const float chunk3[2] = {tiny, 1.0f};
  const absl::string_view bytes(reinterpret_cast<const char*>(chunk3),
                                sizeof(chunk3));
  const int64_t absent[2] = {0, 1};
  absl::Status s = shard->AddChunk(**staging, 3, GradientEncoding::kFp32,
                                   absl::MakeConstSpan(&bytes, 1), absent);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("absent range but holds"));

  staging = shard->BeginPush(Header("a", 0, 2));
  ASSERT_TRUE(staging.ok());
  const float bad[2] = {1.0f, -std::numeric_limits<float>::infinity()};
  s = shard->AddChunk(**staging, 3, absl::MakeSpan(bad, 2));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("element 1 is not finite (-inf)"));
  EXPECT_EQ(shard->version(), 0);
  EXPECT_EQ(Params(*shard), config.initial_slice);
}

}  // namespace
}  // namespace ferry

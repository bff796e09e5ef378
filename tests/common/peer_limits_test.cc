// common/peer_limits.h and the limits enforced by the pure model code:
// tensors, elements, chunks and shards per job.
#include "common/peer_limits.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/parameter_layout.h"
#include "common/sharding.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

TEST(PeerLimitsTest, LimitExceededNamesWhatTheValueAndTheLimit) {
  const absl::Status s = LimitExceeded("the number of things", 5, 4);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "the number of things is 5; the limit is 4");
}

TEST(PeerLimitsTest, IdLengthUpToTheLimitIsFine) {
  EXPECT_TRUE(CheckIdLength("worker_id", "").ok());
  EXPECT_TRUE(CheckIdLength("worker_id", std::string(kMaxIdBytes, 'a')).ok());
  const absl::Status s = CheckIdLength("worker_id", std::string(kMaxIdBytes + 1, 'a'));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("worker_id in bytes is 257"));
}

TEST(PeerLimitsTest, LayoutRefusesTooManyTensors) {
  std::vector<ParameterLayout::TensorDef> defs;
  for (int64_t i = 0; i <= kMaxTensorsPerJob; ++i) defs.push_back({absl::StrCat("t", i), {1}});
  const auto refused = ParameterLayout::Create(defs);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("parameter tensors is 4097"));
  defs.pop_back();
  EXPECT_TRUE(ParameterLayout::Create(defs).ok());
}

TEST(PeerLimitsTest, LayoutRefusesTooManyElementsWithoutOverflow) {
  // One dimension product that overflows int64, and a sum over the limit.
  const auto huge = ParameterLayout::Create({{"w", {int64_t{1} << 40, int64_t{1} << 40}}});
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  const auto sum = ParameterLayout::Create(
      {{"a", {kMaxModelElements / 2}}, {"b", {kMaxModelElements / 2 + 1}}});
  EXPECT_EQ(sum.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(sum.status().message()), HasSubstr("through tensor 'b'"));
  // A zero dimension makes any other dimension fine.
  EXPECT_TRUE(ParameterLayout::Create({{"z", {0, int64_t{1} << 62}}}).ok());
  EXPECT_TRUE(ParameterLayout::Create({{"a", {kMaxModelElements}}}).ok());
}

TEST(PeerLimitsTest, PlacementRefusesTooManyChunksShardsOrElements) {
  const std::vector<int64_t> sizes = {kMaxChunksPerJob + 1};
  const auto chunks = PlaceChunks(sizes, 1, 1);
  EXPECT_EQ(chunks.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(chunks.status().message()), HasSubstr("chunks"));
  EXPECT_TRUE(PlaceChunks(sizes, 1, 2).ok());

  EXPECT_EQ(PlaceChunks({10}, kMaxShardsPerJob + 1, 4).status().code(),
            absl::StatusCode::kResourceExhausted);
  const std::vector<int64_t> big = {kMaxModelElements, 1};
  EXPECT_EQ(PlaceChunks(big, 1).status().code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace ferry

// common/peer_limits.h and the limits enforced by the pure model code:
// tensors, elements, chunks and shards per job.
#include "common/peer_limits.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/sharding.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

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
  const absl::Status s =
      CheckIdLength("worker_id", std::string(kMaxIdBytes + 1, 'a'));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("worker_id in bytes is 257"));
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
  EXPECT_EQ(PlaceChunks(big, 1).status().code(),
            absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace ferry

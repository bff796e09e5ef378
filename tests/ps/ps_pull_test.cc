// GrpcParameterClient pulls against real gRPC servers on loopback
// (tests/ps/ps_client_fixture.h): assembly, versions, faults, pulls started
// ahead, unreachable shards, placement checks.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps/ps_client.h"
#include "tests/ps/ps_client_fixture.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

class PullTest : public ::testing::TestWithParam<int> {};

TEST_P(PullTest, AssemblesTheFlatBufferFromEveryShard) {
  const int num_shards = GetParam();
  Cluster cluster(num_shards, /*version=*/9);
  auto client = cluster.Client();
  EXPECT_EQ(client->num_elements(), kTotal);
  std::vector<float> flat(kTotal, -1.0f);
  absl::StatusOr<int64_t> version = client->Pull(7, flat.data());
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, 9);
  EXPECT_EQ(flat, cluster.params());
  for (int s = 0; s < num_shards; ++s) {
    ASSERT_EQ(cluster.shard(s).pull_requests().size(), 1u);
    const v1::PullRequest request = cluster.shard(s).pull_requests()[0];
    EXPECT_EQ(request.job_id(), "job");
    EXPECT_EQ(request.worker_id(), "w7");
    EXPECT_EQ(request.min_version(), 7);
  }
  // Sent: one PullRequest per shard; received: every chunk's data plus ids.
  EXPECT_EQ(client->bytes().sent,
            num_shards * cluster.shard(0).pull_requests()[0].ByteSizeLong());
  EXPECT_GT(client->bytes().received, kTotal * 4);
}

INSTANTIATE_TEST_SUITE_P(Shards, PullTest, ::testing::Values(1, 2, 3));

TEST(PullCasesTest, ReturnsTheSmallestShardVersion) {
  Cluster cluster(3, /*version=*/9);
  cluster.shard(2).set_version(8);
  auto client = cluster.Client();
  std::vector<float> flat(kTotal);
  EXPECT_EQ(*client->Pull(8, flat.data()), 8);
}

TEST(PullCasesTest, BadShardAnswersAreDataLoss) {
  for (PullFault fault : {PullFault::kMixedVersions, PullFault::kMissingChunk,
                          PullFault::kDuplicateChunk, PullFault::kForeignChunk,
                          PullFault::kWrongSize, PullFault::kOldVersion}) {
    Cluster cluster(3);
    cluster.shard(1).set_fault(fault);
    auto client = cluster.Client();
    std::vector<float> flat(kTotal);
    absl::StatusOr<int64_t> version = client->Pull(5, flat.data());
    EXPECT_EQ(version.status().code(), absl::StatusCode::kDataLoss)
        << static_cast<int>(fault) << ": " << version.status();
    EXPECT_THAT(version.status().message(), HasSubstr("ps shard 1"));
    EXPECT_THAT(version.status().message(),
                HasSubstr(") pull of version >= 5: "));
  }
}

TEST(PullCasesTest, RetriesAnUnavailableShard) {
  Cluster cluster(2);
  cluster.shard(1).FailNextPull({grpc::UNAVAILABLE, "restarting"});
  auto client = cluster.Client();
  std::vector<float> flat(kTotal);
  ASSERT_TRUE(client->Pull(0, flat.data()).ok());
  EXPECT_EQ(flat, cluster.params());
  EXPECT_EQ(cluster.shard(0).pull_requests().size(), 1u);
  EXPECT_EQ(cluster.shard(1).pull_requests().size(), 2u);
}

TEST(PullCasesTest, ShardThatNeverReachesTheVersionTimesOut) {
  Cluster cluster(2);
  cluster.shard(0).set_fault(PullFault::kHang);
  cluster.shard(1).set_version(6);
  auto client = cluster.Client(/*timeout=*/absl::Milliseconds(300));
  std::vector<float> flat(kTotal);
  const absl::Time start = absl::Now();
  absl::StatusOr<int64_t> version = client->Pull(6, flat.data());
  EXPECT_EQ(version.status().code(), absl::StatusCode::kDeadlineExceeded)
      << version.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(PullCasesTest, DataLossOnOneShardCancelsTheWaitingOthers) {
  Cluster cluster(3);
  cluster.shard(0).set_fault(PullFault::kHang);
  cluster.shard(2).set_fault(PullFault::kMixedVersions);
  auto client = cluster.Client(/*timeout=*/absl::Seconds(30));
  std::vector<float> flat(kTotal);
  const absl::Time start = absl::Now();
  EXPECT_EQ(client->Pull(5, flat.data()).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(PendingPullTest, StartedPullFillsTheBufferOnceEveryShardAnswers) {
  Cluster cluster(3, /*version=*/9);
  cluster.shard(2).set_version(8);
  auto client = cluster.Client();
  std::vector<float> flat(kTotal);
  auto pending = client->StartPull(8, flat.data());
  ASSERT_TRUE(pending.ok()) << pending.status();
  absl::StatusOr<int64_t> version = (*pending)->Wait();
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, 8);
  EXPECT_EQ(flat, cluster.params());
  // Waiting twice is a caller error, not a second pull.
  EXPECT_EQ((*pending)->Wait().status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// A pipeline stage's pull: only the chunks that intersect the range, into
// a destination that holds just the range (element e at e - range.begin),
// every shard asked (a shard without such chunks answers with none once it
// has the version); {0, 0} pulls everything again.
TEST(PullCasesTest, PullRangeFetchesOnlyTheChunksInItIntoTheRange) {
  Cluster cluster(3, /*version=*/9);
  auto client = cluster.Client();
  // Tensors 2 and 3 ([10, 26)) are the second "layer".
  const FlatRange layer{10, 26};
  client->SetPullRange(layer);
  // One guard element after the range: nothing may be written there.
  std::vector<float> window(layer.size() + 1, -1.0f);
  ASSERT_TRUE(client->Pull(9, window.data()).ok());
  for (int s = 0; s < 3; ++s) {
    ASSERT_EQ(cluster.shard(s).pull_requests().size(), 1u) << s;
    const v1::PullRequest request = cluster.shard(s).pull_requests().back();
    EXPECT_EQ(request.range_begin(), 10);
    EXPECT_EQ(request.range_end(), 26);
  }
  for (int64_t i = 0; i < layer.size(); ++i) {
    EXPECT_EQ(window[i], cluster.params()[layer.begin + i]) << i;
  }
  EXPECT_EQ(window.back(), -1.0f);
  int64_t chunk_bytes = 0;
  for (const Chunk& c : cluster.chunks()) {
    if (ChunkInPullRange(c, layer)) chunk_bytes += c.length * 4;
  }
  const int64_t ranged = client->bytes().received;
  EXPECT_GE(ranged, chunk_bytes);
  EXPECT_LT(ranged, kTotal * 4);

  std::vector<float> pending_window(layer.size() + 1, -1.0f);
  auto pending = client->StartPull(9, pending_window.data());
  ASSERT_TRUE(pending.ok()) << pending.status();
  ASSERT_TRUE((*pending)->Wait().ok());
  EXPECT_EQ(pending_window, window);

  client->SetPullRange({});
  std::vector<float> flat(kTotal, -1.0f);
  ASSERT_TRUE(client->Pull(9, flat.data()).ok());
  EXPECT_EQ(flat, cluster.params());
}

// A range that cuts chunks: the chunks it touches travel whole, and only
// the range's elements are written.
TEST(PullCasesTest, PullRangeDropsTheElementsOfItsChunksOutsideIt) {
  Cluster cluster(2, /*version=*/4);
  auto client = cluster.Client();
  const FlatRange cut{3, 13};
  bool cuts_a_chunk = false;
  for (const Chunk& c : cluster.chunks()) {
    if (ChunkInPullRange(c, cut) &&
        (c.flat_offset < cut.begin || c.flat_offset + c.length > cut.end)) {
      cuts_a_chunk = true;
    }
  }
  ASSERT_TRUE(cuts_a_chunk);
  client->SetPullRange(cut);
  std::vector<float> window(cut.size() + 2, -1.0f);
  ASSERT_TRUE(client->Pull(4, window.data() + 1).ok());
  EXPECT_EQ(window.front(), -1.0f);
  EXPECT_EQ(window.back(), -1.0f);
  for (int64_t i = 0; i < cut.size(); ++i) {
    EXPECT_EQ(window[1 + i], cluster.params()[cut.begin + i]) << i;
  }
}

// Shard 0 owns [0, 8), no chunk of [10, 26): it is asked all the same, and
// a pull waits until it has the version.
TEST(PullCasesTest, PullRangeWaitsForShardsWithoutChunksInIt) {
  Cluster cluster(3, /*version=*/9);
  cluster.shard(0).set_version(8);
  auto client = cluster.Client(/*timeout=*/absl::Milliseconds(300));
  client->SetPullRange({10, 26});
  std::vector<float> flat(kTotal, -1.0f);
  EXPECT_EQ(*client->Pull(8, flat.data()), 9);  // shard 0 sent no version
  EXPECT_EQ(cluster.shard(0).pull_requests().size(), 1u);
  // Shard 0 never reaches the version: the pull of the other shards' chunks
  // does not return without it.
  cluster.shard(0).set_fault(PullFault::kHang);
  const absl::Time start = absl::Now();
  EXPECT_EQ(client->Pull(9, flat.data()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(PendingPullTest, FailureIsReturnedWithoutRetryAndDroppingCancels) {
  Cluster cluster(2);
  cluster.shard(1).FailNextPull({grpc::UNAVAILABLE, "restarting"});
  auto client = cluster.Client();
  std::vector<float> flat(kTotal);
  auto pending = *client->StartPull(5, flat.data());
  EXPECT_EQ(pending->Wait().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(cluster.shard(1).pull_requests().size(), 1u);

  // A pull that waits for a version that never comes: dropping it cancels
  // it at once, long before its deadline.
  cluster.shard(0).set_fault(PullFault::kHang);
  auto waiting = client->StartPull(6, flat.data());
  ASSERT_TRUE(waiting.ok());
  const absl::Time start = absl::Now();
  waiting->reset();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(UnreachableShardTest, PullAndPushFailWithinTheDeadline) {
  Cluster cluster(2);
  // Nothing listens on a port that a server held and gave back.
  {
    Cluster gone(1);
    cluster.addresses()[1] = gone.addresses()[0];
  }
  auto client = cluster.Client(/*timeout=*/absl::Seconds(1),
                               /*retry_budget=*/absl::Milliseconds(300));
  std::vector<float> flat(kTotal);
  absl::Time start = absl::Now();
  absl::StatusOr<int64_t> version = client->Pull(0, flat.data());
  EXPECT_THAT(version.status().code(),
              ::testing::AnyOf(absl::StatusCode::kUnavailable,
                               absl::StatusCode::kDeadlineExceeded));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));

  start = absl::Now();
  auto session = *client->BeginPush(Info());
  ASSERT_TRUE(session->Ready(0, kTotal, flat.data()).ok());
  const absl::Status status = session->Finish();
  EXPECT_THAT(status.code(),
              ::testing::AnyOf(absl::StatusCode::kUnavailable,
                               absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(status.message(), HasSubstr("ps shard 1"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(GrpcParameterClientTest, CreateValidatesThePlacement) {
  GrpcParameterClientOptions options;
  EXPECT_EQ(GrpcParameterClient::Create(options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.shard_addresses = {"127.0.0.1:1"};
  options.chunks =
      *PlaceChunks(kTensorSizes, 2, kMaxChunk);  // 2 shards, 1 address
  EXPECT_EQ(GrpcParameterClient::Create(options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.chunks = *PlaceChunks(kTensorSizes, 1, kMaxChunk);
  std::swap(options.chunks[0], options.chunks[1]);
  EXPECT_EQ(GrpcParameterClient::Create(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ferry

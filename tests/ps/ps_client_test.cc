// GrpcParameterClient pushes against real gRPC servers on loopback
// (tests/ps/ps_client_fixture.h): chunk placement, early stream close,
// cancellation, retries, shard checks.
#include "ps/ps_client.h"

#include <map>
#include <string>
#include <vector>

#include "common/range_sets.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ps/ps_client_fixture.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

class PushTest : public ::testing::TestWithParam<int> {};

TEST_P(PushTest, SendsExactlyTheOwnedChunksInReverseLayerOrder) {
  const int num_shards = GetParam();
  Cluster cluster(num_shards);
  auto client = cluster.Client();
  const std::vector<float> grads = Ramp(-3.0f, 0.5f);
  auto session = client->BeginPush(Info());
  ASSERT_TRUE(session.ok()) << session.status();
  // Layer 1 = tensors 2 and 3 = [10, 26), then layer 0 = [0, 10).
  ASSERT_TRUE((*session)->Ready(10, 16, grads.data() + 10).ok());
  ASSERT_TRUE((*session)->Ready(0, 10, grads.data()).ok());
  ASSERT_TRUE((*session)->Finish().ok());
  ExpectPushed(cluster, num_shards, grads);

  int64_t sent = 0;
  for (int s = 0; s < num_shards; ++s)
    sent += cluster.shard(s).pushes()[0].bytes;
  EXPECT_EQ(client->bytes().sent, sent);
  // Each PushResponse holds version 5: 2 bytes.
  EXPECT_EQ(client->bytes().received, 2 * num_shards);
}

TEST_P(PushTest, AssemblesChunksFromRangesThatCutThem) {
  const int num_shards = GetParam();
  Cluster cluster(num_shards);
  auto client = cluster.Client();
  const std::vector<float> grads = Ramp(1.0f, -0.125f);
  auto session = *client->BeginPush(Info());
  for (auto [begin, end] : std::vector<std::pair<int, int>>{
           {21, 26}, {2, 3}, {13, 21}, {0, 2}, {3, 13}}) {
    ASSERT_TRUE(session->Ready(begin, end - begin, grads.data() + begin).ok());
  }
  ASSERT_TRUE(session->Finish().ok());
  ExpectPushed(cluster, num_shards, grads);
}

// A pipeline stage's push: zeros outside its layers. Every all-zero chunk
// travels as ENCODING_ZEROS without bytes (whole in one range or cut by
// ranges), the others as fp32; the shards still get every chunk.
TEST_P(PushTest, AllZeroChunksTravelAsFlagsWithoutBytes) {
  const int num_shards = GetParam();
  Cluster cluster(num_shards);
  auto client = cluster.Client();
  std::vector<float> grads = Ramp(1.0f, 0.25f);
  std::fill(grads.begin(), grads.begin() + 10, 0.0f);  // layer 0
  grads[0] = -0.0f;                                    // still zero
  auto session = *client->BeginPush(Info());
  ASSERT_TRUE(session->Ready(10, 16, grads.data() + 10).ok());
  ASSERT_TRUE(session->Ready(0, 4, grads.data()).ok());
  ASSERT_TRUE(session->Ready(4, 6, grads.data() + 4).ok());
  ASSERT_TRUE(session->Finish().ok());
  std::vector<float> expected = grads;
  expected[0] = 0.0f;
  ExpectPushed(cluster, num_shards, expected);
  int zero_chunks = 0, layer0_chunks = 0;
  int64_t sent = 0;
  for (int s = 0; s < num_shards; ++s) {
    zero_chunks += cluster.shard(s).pushes()[0].zero_chunks;
    sent += cluster.shard(s).pushes()[0].bytes;
  }
  for (const Chunk& c : cluster.chunks()) layer0_chunks += c.flat_offset < 10;
  EXPECT_EQ(zero_chunks, layer0_chunks);
  EXPECT_EQ(client->bytes().sent, sent);
  // Against the same push with layer 0 non-zero: its 10 floats (40 bytes)
  // did not travel.
  Cluster dense_cluster(num_shards);
  auto dense_client = dense_cluster.Client();
  const std::vector<float> dense = Ramp(1.0f, 0.25f);
  auto dense_session = *dense_client->BeginPush(Info());
  ASSERT_TRUE(dense_session->Ready(0, kTotal, dense.data()).ok());
  ASSERT_TRUE(dense_session->Finish().ok());
  EXPECT_LE(sent, dense_client->bytes().sent - 40);
}

// A pipeline stage that holds only its layers declares the rest of the
// gradient zeros without a buffer: whole chunks travel as flags, a chunk
// cut by the boundary is assembled with zeros, and overlaps are refused
// as for Ready.
TEST_P(PushTest, ReadyZerosDeclaresZerosWithoutABuffer) {
  const int num_shards = GetParam();
  Cluster cluster(num_shards);
  auto client = cluster.Client();
  const std::vector<float> grads = Ramp(1.0f, 0.25f);
  auto session = *client->BeginPush(Info());
  ASSERT_TRUE(session->ReadyZeros(0, 10).ok());
  ASSERT_TRUE(session->ReadyZeros(10, 2).ok());  // cuts chunk [10, 14)
  EXPECT_EQ(session->ReadyZeros(8, 4).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(session->ReadyZeros(20, 7).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(session->Ready(12, kTotal - 12, grads.data() + 12).ok());
  ASSERT_TRUE(session->Finish().ok());
  std::vector<float> expected = grads;
  std::fill(expected.begin(), expected.begin() + 12, 0.0f);
  ExpectPushed(cluster, num_shards, expected);
  int zero_chunks = 0, layer0_chunks = 0;
  for (int s = 0; s < num_shards; ++s) {
    zero_chunks += cluster.shard(s).pushes()[0].zero_chunks;
  }
  for (const Chunk& c : cluster.chunks()) layer0_chunks += c.flat_offset < 10;
  EXPECT_EQ(zero_chunks, layer0_chunks);
}

// Absent ranges (parameters no sample used) reach each shard as the
// absent pairs of the chunks they cover, in chunk offsets, merged where
// declared piecewise; the chunks still carry every element (zeros there).
TEST_P(PushTest, ReadyAbsentNamesEachChunksAbsentElements) {
  const int num_shards = GetParam();
  Cluster cluster(num_shards);
  auto client = cluster.Client();
  std::vector<float> grads = Ramp(1.0f, 0.25f);
  const std::vector<FlatRange> absent = {{5, 11}, {14, 15}, {20, 22}};
  for (const FlatRange& r : absent) {
    std::fill(grads.begin() + r.begin, grads.begin() + r.end, 0.0f);
  }
  auto session = *client->BeginPush(Info());
  ASSERT_TRUE(session->Ready(22, kTotal - 22, grads.data() + 22).ok());
  ASSERT_TRUE(session->ReadyAbsent(21, 1).ok());  // [20, 22) in two parts
  ASSERT_TRUE(session->ReadyAbsent(20, 1).ok());
  ASSERT_TRUE(session->Ready(15, 5, grads.data() + 15).ok());
  ASSERT_TRUE(session->ReadyAbsent(14, 1).ok());
  ASSERT_TRUE(session->Ready(11, 3, grads.data() + 11).ok());
  ASSERT_TRUE(session->ReadyAbsent(6, 5).ok());  // crosses chunks
  ASSERT_TRUE(session->ReadyAbsent(5, 1).ok());  // merged with [6, 7)
  ASSERT_TRUE(session->Ready(0, 5, grads.data()).ok());
  ASSERT_TRUE(session->Finish().ok());
  ExpectPushed(cluster, num_shards, grads);
  std::map<int32_t, std::vector<int64_t>> got;
  for (int s = 0; s < num_shards; ++s) {
    const std::vector<ReceivedPush> pushes = cluster.shard(s).pushes();
    for (const auto& [chunk, pairs] : pushes[0].absent) got[chunk] = pairs;
  }
  std::map<int32_t, std::vector<int64_t>> want;
  for (const Chunk& c : cluster.chunks()) {
    const std::vector<FlatRange> in =
        ClipRangeSet(absent, c.flat_offset, c.flat_offset + c.length);
    if (!in.empty()) want[c.id] = ToRangePairs(in);
  }
  EXPECT_EQ(got, want);
  EXPECT_GE(want.size(), 4u);
}

INSTANTIATE_TEST_SUITE_P(Shards, PushTest, ::testing::Values(1, 2, 3));

TEST(PushSessionTest, RejectsOverlappingAndOutOfRangeRanges) {
  Cluster cluster(2);
  auto client = cluster.Client();
  const std::vector<float> grads(kTotal, 1.0f);
  auto session = *client->BeginPush(Info());
  ASSERT_TRUE(session->Ready(4, 6, grads.data()).ok());
  EXPECT_EQ(session->Ready(9, 2, grads.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(session->Ready(0, 5, grads.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(session->Ready(20, 7, grads.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(session->Ready(-1, 1, grads.data()).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(session->Ready(0, 4, grads.data()).ok());
  ASSERT_TRUE(session->Ready(10, 16, grads.data()).ok());
  EXPECT_TRUE(session->Finish().ok());
  EXPECT_EQ(session->Finish().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(session->Ready(0, 1, grads.data()).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(PushSessionTest, IncompleteGradientIsCancelledNotCommitted) {
  Cluster cluster(2);
  auto client = cluster.Client();
  const std::vector<float> grads(kTotal, 1.0f);
  auto session = *client->BeginPush(Info());
  // Shard 1 owns [13, 26): all of its chunks are declared, shard 0's not.
  ASSERT_TRUE(session->Ready(10, 16, grads.data() + 10).ok());
  const absl::Status status = session->Finish();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  // Shard 1 got its whole push (its stream closed with its last chunk);
  // shard 0 saw at most a cancelled stream, never a completed one.
  const std::vector<ReceivedPush> pushes1 = WaitForPushes(cluster, 1, 1);
  for (const ReceivedPush& push : cluster.shard(0).pushes())
    EXPECT_TRUE(push.cancelled);
  ASSERT_EQ(pushes1.size(), 1u);
  EXPECT_FALSE(pushes1[0].cancelled);
}

// A shard's stream closes as soon as its last chunk is sent, before
// Finish(): the shard commits (and may apply the step) while the other
// shards' chunks are still being produced.
TEST(PushSessionTest, ShardStreamClosesWithItsLastChunk) {
  Cluster cluster(2);
  auto client = cluster.Client();
  const std::vector<float> grads = Ramp(1.0f, 1.0f);
  auto session = *client->BeginPush(Info());
  ASSERT_TRUE(session->Ready(13, 13, grads.data() + 13).ok());
  const std::vector<ReceivedPush> early = WaitForPushes(cluster, 1, 1);
  ASSERT_EQ(early.size(), 1u);  // complete while shard 0 still waits
  EXPECT_FALSE(early[0].cancelled);
  EXPECT_TRUE(cluster.shard(0).pushes().empty());
  ASSERT_TRUE(session->Ready(0, 13, grads.data()).ok());
  ASSERT_TRUE(session->Finish().ok());
  ExpectPushed(cluster, 2, grads);
}

TEST(PushSessionTest, AbandonedSessionDoesNotHang) {
  Cluster cluster(3);
  auto client = cluster.Client();
  const std::vector<float> grads(kTotal, 1.0f);
  const absl::Time start = absl::Now();
  {
    auto session = *client->BeginPush(Info());
    ASSERT_TRUE(session->Ready(0, 10, grads.data()).ok());
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(PushSessionTest, ShardRejectionIsReturnedNamingTheShard) {
  Cluster cluster(3);
  cluster.shard(1).FailNextPush({grpc::ABORTED, "stale generation"});
  auto client = cluster.Client();
  const std::vector<float> grads(kTotal, 2.0f);
  auto session = *client->BeginPush(Info());
  ASSERT_TRUE(session->Ready(0, kTotal, grads.data()).ok());
  const absl::Status status = session->Finish();
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(status.message(), HasSubstr("ps shard 1"));
  EXPECT_THAT(status.message(), HasSubstr(") push: "));
  EXPECT_THAT(status.message(), HasSubstr("stale generation"));
}

TEST(PushSessionTest, RetriesAnUnavailableShardWithTheSameMessages) {
  Cluster cluster(2);
  cluster.shard(0).FailNextPush({grpc::UNAVAILABLE, "restarting"});
  auto client = cluster.Client();
  const std::vector<float> grads = Ramp(0.0f, 1.0f);
  auto session = *client->BeginPush(Info());
  ASSERT_TRUE(session->Ready(0, kTotal, grads.data()).ok());
  ASSERT_TRUE(session->Finish().ok());
  const std::vector<ReceivedPush> attempts = cluster.shard(0).pushes();
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].chunks, attempts[1].chunks);
  ASSERT_EQ(cluster.shard(1).pushes().size(), 1u);
}

TEST(PushSessionTest, RetryThatMeetsAlreadyExistsCountsAsAccepted) {
  Cluster cluster(1);
  cluster.shard(0).FailNextPush({grpc::UNAVAILABLE, "response lost"});
  cluster.shard(0).FailNextPush({grpc::ALREADY_EXISTS, "already pushed"});
  auto client = cluster.Client();
  const std::vector<float> grads(kTotal, 1.0f);
  auto session = *client->BeginPush(Info());
  ASSERT_TRUE(session->Ready(0, kTotal, grads.data()).ok());
  EXPECT_TRUE(session->Finish().ok());
}

// An abandoned attempt at the same lease got through to this shard (another
// shard failed it): the shard answers the next attempt ALREADY_EXISTS, which
// is an accepted push, not a refusal that would make the worker give the
// step up again forever.
TEST(PushSessionTest, FirstAttemptThatMeetsAlreadyExistsCountsAsAccepted) {
  Cluster cluster(2);
  cluster.shard(1).FailNextPush({grpc::ALREADY_EXISTS, "already pushed"});
  auto client = cluster.Client();
  const std::vector<float> grads(kTotal, 1.0f);
  auto session = *client->BeginPush(Info());
  ASSERT_TRUE(session->Ready(0, kTotal, grads.data()).ok());
  EXPECT_TRUE(session->Finish().ok());
  EXPECT_EQ(cluster.shard(1).pushes().size(), 1u);  // no retry needed
}

TEST(CheckShardsTest, OkWhenEveryShardAnswersErrorNamingTheOneThatDoesNot) {
  Cluster cluster(2);
  EXPECT_TRUE(cluster.Client()->CheckShards(absl::Seconds(2)).ok());
  {
    Cluster gone(1);
    cluster.addresses()[1] = gone.addresses()[0];
  }
  auto client = cluster.Client();
  const absl::Time start = absl::Now();
  const absl::Status status = client->CheckShards(absl::Milliseconds(500));
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("ps shard 1"));
  EXPECT_THAT(status.message(), HasSubstr(") shard info: "));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

}  // namespace
}  // namespace ferry

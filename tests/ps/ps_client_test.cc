// GrpcParameterClient against real gRPC servers on loopback ports: a minimal
// ParameterServer service that records what it receives and serves pulls
// with injectable faults.
#include "ps/ps_client.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/sharding.h"
#include "ferry/v1/ps.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/rpc_util.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

enum class PullFault {
  kNone,
  kMixedVersions,
  kMissingChunk,
  kDuplicateChunk,
  kForeignChunk,
  kWrongSize,
  kOldVersion,
  kHang,
};

struct ReceivedPush {
  v1::PushHeader header;
  std::map<int32_t, std::vector<float>> chunks;
  int64_t bytes = 0;  // ByteSizeLong() of every message
  bool cancelled = false;
};

// One PS shard as the test sees it: owns the chunks placed on `shard_id`.
class FakeShard final : public v1::ParameterServer::Service {
 public:
  FakeShard(int shard_id, std::vector<Chunk> chunks, std::vector<float> params,
            int64_t version)
      : shard_id_(shard_id),
        chunks_(std::move(chunks)),
        params_(std::move(params)),
        version_(version) {}

  grpc::Status ShardInfo(grpc::ServerContext*, const v1::ShardInfoRequest*,
                         v1::ShardInfoResponse* response) override {
    response->set_shard_id(shard_id_);
    return grpc::Status::OK;
  }

  grpc::Status Push(grpc::ServerContext* context,
                    grpc::ServerReader<v1::PushRequest>* reader,
                    v1::PushResponse* response) override {
    ReceivedPush push;
    v1::PushRequest request;
    bool first = true;
    while (reader->Read(&request)) {
      push.bytes += request.ByteSizeLong();
      if (first) {
        if (!request.has_header()) return {grpc::INVALID_ARGUMENT, "no header"};
        push.header = request.header();
        first = false;
        continue;
      }
      std::vector<float> values(request.data().size() / sizeof(float));
      std::memcpy(values.data(), request.data().data(), request.data().size());
      if (!push.chunks.emplace(request.chunk_id(), std::move(values)).second) {
        return {grpc::INVALID_ARGUMENT, "duplicate chunk"};
      }
    }
    push.cancelled = context->IsCancelled();
    absl::MutexLock lock(&mu_);
    pushes_.push_back(std::move(push));
    if (!push_errors_.empty()) {
      grpc::Status error = push_errors_.front();
      push_errors_.pop_front();
      return error;
    }
    response->set_version(version_);
    return grpc::Status::OK;
  }

  grpc::Status Pull(grpc::ServerContext* context,
                    const v1::PullRequest* request,
                    grpc::ServerWriter<v1::PullResponse>* writer) override {
    PullFault fault;
    int64_t version;
    {
      absl::MutexLock lock(&mu_);
      pull_requests_.push_back(*request);
      if (!pull_errors_.empty()) {
        grpc::Status error = pull_errors_.front();
        pull_errors_.pop_front();
        return error;
      }
      fault = fault_;
      version = version_;
    }
    if (fault == PullFault::kHang) {
      while (!context->IsCancelled()) absl::SleepFor(absl::Milliseconds(5));
      return {grpc::DEADLINE_EXCEEDED, "version not reached"};
    }
    if (fault == PullFault::kOldVersion) version = request->min_version() - 1;
    std::vector<const Chunk*> owned;
    for (const Chunk& c : chunks_) {
      if (c.shard == shard_id_) owned.push_back(&c);
    }
    if (fault == PullFault::kMissingChunk) owned.pop_back();
    if (fault == PullFault::kDuplicateChunk) owned.push_back(owned.front());
    if (fault == PullFault::kForeignChunk) {
      for (const Chunk& c : chunks_) {
        if (c.shard != shard_id_) {
          owned.push_back(&c);
          break;
        }
      }
    }
    for (size_t i = 0; i < owned.size(); ++i) {
      const Chunk& c = *owned[i];
      v1::PullResponse response;
      response.set_version(
          fault == PullFault::kMixedVersions && i > 0 ? version + 1 : version);
      response.set_chunk_id(c.id);
      int64_t length = c.length + (fault == PullFault::kWrongSize ? 1 : 0);
      response.mutable_data()->resize(length * sizeof(float));
      std::memcpy(response.mutable_data()->data(), &params_[c.flat_offset],
                  c.length * sizeof(float));
      if (!writer->Write(response)) break;
    }
    return grpc::Status::OK;
  }

  void set_fault(PullFault fault) {
    absl::MutexLock lock(&mu_);
    fault_ = fault;
  }
  void set_version(int64_t version) {
    absl::MutexLock lock(&mu_);
    version_ = version;
  }
  void FailNextPush(grpc::Status status) {
    absl::MutexLock lock(&mu_);
    push_errors_.push_back(std::move(status));
  }
  void FailNextPull(grpc::Status status) {
    absl::MutexLock lock(&mu_);
    pull_errors_.push_back(std::move(status));
  }
  std::vector<ReceivedPush> pushes() {
    absl::MutexLock lock(&mu_);
    return pushes_;
  }
  std::vector<v1::PullRequest> pull_requests() {
    absl::MutexLock lock(&mu_);
    return pull_requests_;
  }

 private:
  const int shard_id_;
  const std::vector<Chunk> chunks_;
  const std::vector<float> params_;
  absl::Mutex mu_;
  int64_t version_ ABSL_GUARDED_BY(mu_);
  PullFault fault_ ABSL_GUARDED_BY(mu_) = PullFault::kNone;
  std::deque<grpc::Status> push_errors_ ABSL_GUARDED_BY(mu_);
  std::deque<grpc::Status> pull_errors_ ABSL_GUARDED_BY(mu_);
  std::vector<ReceivedPush> pushes_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::PullRequest> pull_requests_ ABSL_GUARDED_BY(mu_);
};

// Four tensors as two "layers" (weight + bias each), cut into chunks of at
// most 4 elements so that every shard owns several chunks.
const std::vector<int64_t> kTensorSizes = {7, 3, 11, 5};
constexpr int64_t kTotal = 26;
constexpr int64_t kMaxChunk = 4;

std::vector<float> Ramp(float start, float step) {
  std::vector<float> v(kTotal);
  for (int64_t i = 0; i < kTotal; ++i) v[i] = start + step * i;
  return v;
}

class Cluster {
 public:
  explicit Cluster(int num_shards, int64_t version = 5)
      : params_(Ramp(100.0f, 0.25f)) {
    chunks_ = *PlaceChunks(kTensorSizes, num_shards, kMaxChunk);
    for (int s = 0; s < num_shards; ++s) {
      shards_.push_back(
          std::make_unique<FakeShard>(s, chunks_, params_, version));
      grpc::ServerBuilder builder;
      ConfigureServerBuilder(builder);
      int port = 0;
      builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                               &port);
      builder.RegisterService(shards_.back().get());
      servers_.push_back(builder.BuildAndStart());
      addresses_.push_back("127.0.0.1:" + std::to_string(port));
    }
  }
  ~Cluster() {
    for (auto& server : servers_)
      server->Shutdown(absl::ToChronoTime(absl::Now()));
  }

  std::unique_ptr<GrpcParameterClient> Client(
      absl::Duration timeout = absl::Seconds(10),
      absl::Duration retry_budget = absl::Seconds(5)) {
    GrpcParameterClientOptions options;
    options.job_id = "job";
    options.worker_id = "w7";
    options.shard_addresses = addresses_;
    options.chunks = chunks_;
    options.rpc_timeout = timeout;
    options.retry.initial_backoff = absl::Milliseconds(20);
    options.retry.budget = retry_budget;
    auto client = GrpcParameterClient::Create(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return std::move(client).value();
  }

  FakeShard& shard(int s) { return *shards_[s]; }
  const std::vector<Chunk>& chunks() const { return chunks_; }
  const std::vector<float>& params() const { return params_; }
  std::vector<std::string>& addresses() { return addresses_; }

 private:
  std::vector<float> params_;
  std::vector<Chunk> chunks_;
  std::vector<std::unique_ptr<FakeShard>> shards_;
  std::vector<std::unique_ptr<grpc::Server>> servers_;
  std::vector<std::string> addresses_;
};

PushInfo Info() {
  PushInfo info;
  info.generation = 3;
  info.step = 12;
  info.num_samples = 64;
  info.base_version = 5;
  return info;
}

// Checks that every shard got one complete push of `grads`: exactly its own
// chunks, with the right values and header.
void ExpectPushed(Cluster& cluster, int num_shards,
                  const std::vector<float>& grads,
                  size_t pushes_per_shard = 1) {
  for (int s = 0; s < num_shards; ++s) {
    const std::vector<ReceivedPush> pushes = cluster.shard(s).pushes();
    ASSERT_EQ(pushes.size(), pushes_per_shard) << "shard " << s;
    const ReceivedPush& push = pushes.back();
    EXPECT_FALSE(push.cancelled);
    EXPECT_EQ(push.header.job_id(), "job");
    EXPECT_EQ(push.header.worker_id(), "w7");
    EXPECT_EQ(push.header.generation(), 3);
    EXPECT_EQ(push.header.step(), 12);
    EXPECT_EQ(push.header.num_samples(), 64);
    EXPECT_EQ(push.header.base_version(), 5);
    std::map<int32_t, std::vector<float>> expected;
    for (const Chunk& c : cluster.chunks()) {
      if (c.shard != s) continue;
      expected[c.id].assign(grads.begin() + c.flat_offset,
                            grads.begin() + c.flat_offset + c.length);
    }
    EXPECT_EQ(push.chunks, expected) << "shard " << s;
  }
}

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

// Waits (bounded: 5 s) until shard `s` has received `n` push streams.
std::vector<ReceivedPush> WaitForPushes(Cluster& cluster, int s, size_t n) {
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  std::vector<ReceivedPush> pushes = cluster.shard(s).pushes();
  while (pushes.size() < n && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));
    pushes = cluster.shard(s).pushes();
  }
  return pushes;
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

// The limits of common/peer_limits.h on a PS shard: each refusal is
// RESOURCE_EXHAUSTED naming the limit, changes nothing, and frees up once the
// held resource is released. The core first, then over real gRPC.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/rpc_util.h"
#include "ps/ps_server.h"
#include "ps/ps_shard.h"
#include "tests/ps/ps_shard_testing.h"
#include "tests/testing/wait_until.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

PsShardConfig LimitedConfig(PsConsistency consistency = PsConsistency::kSync) {
  PsShardConfig config = TestConfig(consistency);
  config.limits.max_open_pushes = 2;
  config.limits.max_step_pushes = 2;
  config.limits.max_async_workers = 2;
  config.limits.max_pending_pulls = 2;
  return config;
}

void ExpectLimit(const absl::Status& status, const std::string& what) {
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(what));
  EXPECT_THAT(std::string(status.message()), HasSubstr("the limit is"));
}

TEST(PsShardLimitsTest, OpenPushesAreBoundedAndFreedWhenAStagingEnds) {
  auto shard = MakeShard(LimitedConfig());
  auto a = shard->BeginPush(Header("a", 0, 1));
  auto b = shard->BeginPush(Header("b", 0, 1));
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = shard->BeginPush(Header("c", 0, 1));
  ExpectLimit(c.status(), "the number of pushes being received is 3");
  EXPECT_EQ(shard->Info().rejected_pushes, 1);

  a->reset();  // an abandoned stream (the client went away)
  auto d = shard->BeginPush(Header("d", 0, 1));
  EXPECT_TRUE(d.ok()) << d.status();
  // A committed push releases its slot too.
  b->reset();
  d->reset();
  ASSERT_TRUE(PushSlice(*shard, Header("e", 0, 1), {1, 1, 1, 1}).ok());
  auto f = shard->BeginPush(Header("f", 0, 1));
  auto g = shard->BeginPush(Header("g", 0, 1));
  EXPECT_TRUE(f.ok() && g.ok());
}

TEST(PsShardLimitsTest, PushesBufferedForTheOpenStepAreBounded) {
  auto shard = MakeShard(LimitedConfig());
  ASSERT_TRUE(PushSlice(*shard, Header("a", 0, 1), {1, 1, 1, 1}).ok());
  ASSERT_TRUE(PushSlice(*shard, Header("b", 0, 1), {1, 1, 1, 1}).ok());
  ExpectLimit(PushSlice(*shard, Header("c", 0, 1), {1, 1, 1, 1}).status(),
              "pushes buffered for step 0 is 3");
  // The finalize of the two buffered pushes is unaffected; the next step
  // has room again.
  const std::vector<PsContributor> both = {{"a", 1}, {"b", 1}};
  ASSERT_TRUE(shard->FinalizeStep("job", 0, both, 0).ok());
  EXPECT_TRUE(PushSlice(*shard, Header("c", 1, 1), {1, 1, 1, 1}).ok());
}

TEST(PsShardLimitsTest, FinalizeNamingMoreContributorsThanTheLimitIsRefused) {
  auto shard = MakeShard(LimitedConfig());
  ASSERT_TRUE(PushSlice(*shard, Header("a", 0, 1), {1, 1, 1, 1}).ok());
  const std::vector<float> before = Params(*shard);
  const std::vector<PsContributor> three = {{"a", 1}, {"b", 1}, {"c", 1}};
  ExpectLimit(shard->FinalizeStep("job", 0, three, 0).status(),
              "contributors of finalize of step 0 is 3");
  EXPECT_EQ(shard->version(), 0);
  EXPECT_EQ(Params(*shard), before);
}

TEST(PsShardLimitsTest, AsyncWorkersRememberedAreBounded) {
  auto shard = MakeShard(LimitedConfig(PsConsistency::kAsync));
  ASSERT_TRUE(PushSlice(*shard, Header("a", 1, 1), {1, 1, 1, 1}).ok());
  ASSERT_TRUE(PushSlice(*shard, Header("b", 1, 1, 0, 1), {1, 1, 1, 1}).ok());
  const int64_t version = shard->version();
  ExpectLimit(PushSlice(*shard, Header("c", 1, 1, 0, 2), {1, 1, 1, 1}).status(),
              "async workers the shard remembers is 3");
  EXPECT_EQ(shard->version(), version);
  // Known workers go on pushing.
  EXPECT_TRUE(PushSlice(*shard, Header("a", 2, 1, 0, 2), {1, 1, 1, 1}).ok());
}

TEST(PsShardLimitsTest, PendingPullsAreBoundedAndFreedByCancel) {
  auto shard = MakeShard(LimitedConfig());
  int called = 0;
  auto count = [&](absl::StatusOr<std::shared_ptr<const PsSnapshot>>) {
    ++called;
  };
  auto first = shard->WaitForVersion("job", 1, count);
  auto second = shard->WaitForVersion("job", 5, count);
  ASSERT_TRUE(first.ok() && second.ok());
  auto third = shard->WaitForVersion("job", 1, count);
  ExpectLimit(third.status(), "the number of pending pulls is 3");
  // A pull of a version already there waits for nothing and is served.
  EXPECT_TRUE(shard->WaitForVersion("job", 0, count).ok());
  EXPECT_EQ(called, 1);

  EXPECT_TRUE(shard->CancelWait(*second));
  EXPECT_TRUE(shard->WaitForVersion("job", 1, count).ok());
  ASSERT_TRUE(PushSlice(*shard, Header("a", 0, 1), {1, 1, 1, 1}).ok());
  const std::vector<PsContributor> a = {{"a", 1}};
  ASSERT_TRUE(shard->FinalizeStep("job", 0, a, 0).ok());
  EXPECT_EQ(called, 3);  // both waits for version 1 answered
  EXPECT_EQ(shard->Info().pending_pulls, 0);
}

TEST(PsShardLimitsTest, OverlongIdentifiersAreRefused) {
  auto shard = MakeShard(TestConfig());
  const std::string long_id(kMaxIdBytes + 1, 'w');
  ExpectLimit(shard->BeginPush(Header(long_id, 0, 1)).status(),
              absl::StrCat("worker_id in bytes is ", kMaxIdBytes + 1));
  PsPushHeader header = Header("a", 0, 1);
  header.job_id = std::string(kMaxIdBytes + 1, 'j');
  ExpectLimit(shard->BeginPush(header).status(), "job_id in bytes");
  EXPECT_TRUE(
      shard->BeginPush(Header(std::string(kMaxIdBytes, 'w'), 0, 1)).ok());
}

// Over gRPC: the same statuses reach the client, and the server keeps serving.
class PsLimitsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    shard_ = MakeShard(LimitedConfig());
    auto server = StartPsServer(shard_.get(), "127.0.0.1:0");
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(server).value();
    address_ = absl::StrCat("127.0.0.1:", server_.port);
    stub_ = v1::ParameterServer::NewStub(MakeChannel(address_));
  }

  std::unique_ptr<PsShard> shard_;
  PsServer server_;
  std::string address_;
  std::unique_ptr<v1::ParameterServer::Stub> stub_;
};

TEST_F(PsLimitsServiceTest, PullsBeyondTheLimitGetResourceExhausted) {
  // Two pulls wait for version 1; the third is refused at once.
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::PullResponse>>> readers;
  v1::PullRequest request;
  request.set_job_id("job");
  request.set_min_version(1);
  for (int i = 0; i < 3; ++i) {
    // The server registers the waits in order; wait for each before the next.
    const int64_t expected = std::min(i, 2);
    const absl::Status waiting = testutil::WaitUntil(
        absl::StrCat(expected, " pending pulls"),
        [&] { return shard_->Info().pending_pulls >= expected; });
    ASSERT_TRUE(waiting.ok()) << waiting;
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    SetDeadline(*contexts.back(), absl::Seconds(10));
    readers.push_back(stub_->Pull(contexts.back().get(), request));
  }
  v1::PullResponse message;
  EXPECT_FALSE(readers[2]->Read(&message));
  const grpc::Status refused = readers[2]->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("pending pulls"));

  // The two waiting pulls are answered by the next version.
  ASSERT_TRUE(PushSlice(*shard_, Header("a", 0, 1), {1, 1, 1, 1}).ok());
  const std::vector<PsContributor> a = {{"a", 1}};
  ASSERT_TRUE(shard_->FinalizeStep("job", 0, a, 0).ok());
  for (int i = 0; i < 2; ++i) {
    int messages = 0;
    while (readers[i]->Read(&message)) ++messages;
    EXPECT_TRUE(readers[i]->Finish().ok());
    EXPECT_EQ(messages, 3);  // the shard's three chunks
  }
}

TEST_F(PsLimitsServiceTest,
       OversizedMessageIsResourceExhaustedAndChangesNothing) {
  // A channel that would send anything: the server's limit is what answers.
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  auto channel = grpc::CreateCustomChannel(
      address_, grpc::InsecureChannelCredentials(), args);
  auto stub = v1::ParameterServer::NewStub(channel);
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(20));
  v1::PushResponse response;
  auto writer = stub->Push(&context, &response);
  v1::PushRequest request;
  request.mutable_header()->set_job_id("job");
  request.mutable_header()->set_worker_id("big");
  request.mutable_header()->set_num_samples(1);
  request.set_chunk_id(2);
  request.set_data(std::string(kMaxMessageBytes + 1, '\0'));
  writer->Write(request);
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << status.error_message();
  EXPECT_EQ(shard_->version(), 0);
  // The server still serves.
  EXPECT_TRUE(PushSlice(*shard_, Header("a", 0, 1), {1, 1, 1, 1}).ok());
}

}  // namespace
}  // namespace ferry

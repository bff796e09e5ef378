// A worker's direct calls of the shard its process hosts
// (ps/local_shard_calls.h) against the same shard reached over gRPC on
// loopback: a sync step pushed one way by one worker and the other way by
// another applies exactly what two gRPC pushes apply; a pull that waits past
// its deadline, or is dropped, ends without leaving a wait behind; a push
// the shard refuses names the shard; a stopped host answers UNAVAILABLE.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/optimizer_config.h"
#include "common/sharding.h"
#include "gtest/gtest.h"
#include "model/model_params.h"
#include "proto/job_convert.h"
#include "ps/ps_client.h"
#include "ps/ps_shard.h"
#include "ps/shard_host.h"

namespace ferry {
namespace {

v1::JobSpec LocalCallsJob() {
  v1::JobSpec job;
  job.set_job_id("direct");
  job.set_model("8-4-2");
  job.set_global_batch(4);
  job.set_epochs(1);
  job.set_seed(11);
  job.set_max_chunk_elements(7);  // several chunks, one cut mid-tensor
  *job.mutable_optimizer() = ToProto(OptimizerConfig{});
  job.add_shard_addresses("127.0.0.1:1");
  return job;
}

struct HostedJob {
  v1::JobSpec job;
  std::unique_ptr<ShardHost> host;
};

HostedJob StartHostedJob() {
  HostedJob hosted{LocalCallsJob(), nullptr};
  ShardHostOptions options;
  options.listen = {"127.0.0.1:0"};
  absl::StatusOr<std::unique_ptr<ShardHost>> host =
      ShardHost::Start(hosted.job, std::move(options));
  EXPECT_TRUE(host.ok()) << host.status();
  hosted.host = *std::move(host);
  hosted.job.set_shard_addresses(
      0, absl::StrCat("127.0.0.1:", hosted.host->ports()[0]));
  return hosted;
}

// Worker `worker_id`'s client of the hosted job: the shard called directly
// when `direct`, else over gRPC on loopback.
std::unique_ptr<GrpcParameterClient> WorkerClient(
    const HostedJob& hosted, const std::string& worker_id, bool direct,
    absl::Duration timeout = absl::Seconds(10)) {
  GrpcParameterClientOptions options;
  options.job_id = hosted.job.job_id();
  options.worker_id = worker_id;
  options.shard_addresses = {hosted.job.shard_addresses(0)};
  options.chunks = *PlaceChunks(JobDenseLayout(hosted.job)->TensorSizes(), 1,
                                hosted.job.max_chunk_elements());
  options.rpc_timeout = timeout;
  options.retry.budget = absl::ZeroDuration();
  if (direct) options.in_process_shards[0] = hosted.host->InProcess(0);
  return *GrpcParameterClient::Create(std::move(options));
}

std::vector<float> Gradient(int64_t n, float scale) {
  std::vector<float> g(n);
  for (int64_t i = 0; i < n; ++i) g[i] = scale * static_cast<float>(i % 5 - 2);
  return g;
}

// Step 0 of a sync job of workers w0 and w1 (2 samples each), pushed by
// both, then version 1 pulled by both; returns {w0's pull, w1's pull}.
std::vector<std::vector<float>> OneSyncStep(const HostedJob& hosted,
                                            bool w0_direct) {
  auto w0 = WorkerClient(hosted, "w0", w0_direct);
  auto w1 = WorkerClient(hosted, "w1", /*direct=*/false);
  const int64_t n = w0->num_elements();
  const std::vector<float> g0 = Gradient(n, 0.5f);
  const std::vector<float> g1 = Gradient(n, -0.25f);
  PushInfo info;
  info.step = 0;
  info.num_samples = 2;
  info.step_contributors = {{"w0", 2}, {"w1", 2}};
  std::vector<std::vector<float>> pulled(2, std::vector<float>(n, -1.0f));
  auto ahead = w0->StartPull(1, pulled[0].data());
  EXPECT_TRUE(ahead.ok()) << ahead.status();
  for (auto [client, grads] : {std::pair{w0.get(), &g0}, {w1.get(), &g1}}) {
    auto push = client->BeginPush(info);
    EXPECT_TRUE(push.ok()) << push.status();
    // Two ranges, the later first (as backward produces them).
    EXPECT_TRUE((*push)->Ready(n / 2, n - n / 2, grads->data() + n / 2).ok());
    EXPECT_TRUE((*push)->Ready(0, n / 2, grads->data()).ok());
    EXPECT_TRUE((*push)->Finish().ok());
  }
  absl::StatusOr<int64_t> v0 = (*ahead)->Wait();
  absl::StatusOr<int64_t> v1 = w1->Pull(1, pulled[1].data());
  EXPECT_TRUE(v0.ok()) << v0.status();
  EXPECT_TRUE(v1.ok()) << v1.status();
  EXPECT_EQ(*v0, 1);
  EXPECT_EQ(*v1, 1);
  if (w0_direct) {
    EXPECT_EQ(w0->bytes().sent, 0);  // nothing crossed a socket
    EXPECT_EQ(w0->bytes().received, 0);
    EXPECT_GE(w0->peer_bytes().at("ps0").sent,
              static_cast<int64_t>(n * sizeof(float)));
    EXPECT_GE(w0->peer_bytes().at("ps0").received,
              static_cast<int64_t>(n * sizeof(float)));
  }
  return pulled;
}

TEST(LocalShardCallsTest, ADirectPushAppliesWhatAGrpcPushApplies) {
  HostedJob direct = StartHostedJob();
  HostedJob remote = StartHostedJob();
  const std::vector<std::vector<float>> by_direct = OneSyncStep(direct, true);
  const std::vector<std::vector<float>> by_grpc = OneSyncStep(remote, false);
  EXPECT_EQ(by_direct[0], by_direct[1]);
  EXPECT_EQ(by_direct[0], by_grpc[0]);
  const std::vector<float> initial = *JobDenseInitialSlice(
      direct.job, 0, static_cast<int64_t>(by_direct[0].size()));
  EXPECT_NE(by_direct[0], initial);  // the step moved the weights
  EXPECT_EQ(direct.host->InProcess(0).shard->Info().steps_finalized_on_push, 1);
}

TEST(LocalShardCallsTest, APullPastItsDeadlineOrDroppedLeavesNoWait) {
  HostedJob hosted = StartHostedJob();
  auto own = WorkerClient(hosted, "w0", true, absl::Milliseconds(200));
  PsShard* shard = hosted.host->InProcess(0).shard;
  std::vector<float> params(own->num_elements());

  const absl::Time begun = absl::Now();
  absl::StatusOr<int64_t> late = own->Pull(5, params.data());
  EXPECT_TRUE(absl::IsDeadlineExceeded(late.status())) << late.status();
  EXPECT_NE(late.status().message().find("ps shard 0"), std::string::npos)
      << late.status();
  EXPECT_GE(absl::Now() - begun, absl::Milliseconds(200));
  EXPECT_EQ(shard->Info().pending_pulls, 0);

  auto dropped = own->StartPull(5, params.data());
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(shard->Info().pending_pulls, 1);
  dropped->reset();  // cancels and waits: nothing writes any more
  EXPECT_EQ(shard->Info().pending_pulls, 0);

  // A version that exists lands at once, on the caller's thread.
  absl::StatusOr<int64_t> now = own->Pull(0, params.data());
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ(params, *JobDenseInitialSlice(hosted.job, 0, own->num_elements()));
}

TEST(LocalShardCallsTest, ARefusedPushNamesTheShardAndChangesNothing) {
  HostedJob hosted = StartHostedJob();
  auto own = WorkerClient(hosted, "w0", true);
  PsShard* shard = hosted.host->InProcess(0).shard;
  const std::vector<float> g = Gradient(own->num_elements(), 1.0f);
  PushInfo info;
  info.step = 3;  // the shard is at version 0
  info.num_samples = 4;
  info.step_contributors = {{"w0", 4}};
  auto push = own->BeginPush(info);
  ASSERT_TRUE(push.ok());
  ASSERT_TRUE((*push)->Ready(0, own->num_elements(), g.data()).ok());
  const absl::Status refused = (*push)->Finish();
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_NE(refused.message().find("ps shard 0"), std::string::npos) << refused;
  EXPECT_EQ(shard->version(), 0);
  EXPECT_GE(shard->Info().rejected_pushes, 1);

  // A push dropped before its last range applies nothing either.
  info.step = 0;
  auto dropped = own->BeginPush(info);
  ASSERT_TRUE(dropped.ok());
  ASSERT_TRUE((*dropped)->Ready(0, 3, g.data()).ok());
  dropped->reset();
  EXPECT_EQ(shard->version(), 0);
  auto whole = own->BeginPush(info);
  ASSERT_TRUE(whole.ok());
  ASSERT_TRUE((*whole)->Ready(0, own->num_elements(), g.data()).ok());
  EXPECT_TRUE((*whole)->Finish().ok());
  EXPECT_EQ(shard->version(), 1);
}

TEST(LocalShardCallsTest, AStoppedHostAnswersUnavailable) {
  HostedJob hosted = StartHostedJob();
  auto own = WorkerClient(hosted, "w0", true);
  std::vector<float> params(own->num_elements());
  auto waiting = own->StartPull(1, params.data());
  ASSERT_TRUE(waiting.ok());
  ASSERT_TRUE(hosted.host->Stop(absl::Seconds(1)).ok());
  EXPECT_TRUE(absl::IsUnavailable((*waiting)->Wait().status()));
  EXPECT_TRUE(absl::IsUnavailable(own->Pull(1, params.data()).status()));
  PushInfo info;
  info.num_samples = 4;
  info.step_contributors = {{"w0", 4}};
  auto push = own->BeginPush(info);
  ASSERT_TRUE(push.ok());
  const std::vector<float> g = Gradient(own->num_elements(), 1.0f);
  ASSERT_TRUE((*push)->Ready(0, own->num_elements(), g.data()).ok());
  EXPECT_TRUE(absl::IsUnavailable((*push)->Finish()));
}

}  // namespace
}  // namespace ferry

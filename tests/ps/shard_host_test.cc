// ShardHost over real gRPC on loopback: the process's own worker reaches its
// hosted shard in the process (ShardHost::InProcess), without a socket and
// without the link shaper, while other callers still go through the shaper;
// Stop checkpoints and ends the in-process calls; a process or partition count
// the job does not have is refused.
#include "ps/shard_host.h"

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/optimizer_config.h"
#include "common/sharding.h"
#include "gtest/gtest.h"
#include "model/model_params.h"
#include "proto/job_convert.h"
#include "ps/ps_client.h"

namespace ferry {
namespace {

v1::JobSpec ShardHostJob(int shards) {
  v1::JobSpec job;
  job.set_job_id("hosted");
  job.set_model("8-4-2");
  job.set_global_batch(4);
  job.set_epochs(1);
  job.set_seed(7);
  job.set_max_chunk_elements(kDefaultMaxChunkElements);
  *job.mutable_optimizer() = ToProto(OptimizerConfig{});
  for (int s = 0; s < shards; ++s) job.add_shard_addresses("127.0.0.1:1");
  return job;
}

std::string FreshDir(const std::string& name) {
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/shard-host-", name, "-", getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// A client of `job`'s shards (addresses as in the job), reaching shard 0
// in-process through `local` when it is set.
std::unique_ptr<GrpcParameterClient> ClientOf(
    const v1::JobSpec& job, std::optional<InProcessShard> local) {
  const ParameterLayout layout = *JobDenseLayout(job);
  GrpcParameterClientOptions options;
  options.job_id = job.job_id();
  options.worker_id = "w0";
  options.shard_addresses.assign(job.shard_addresses().begin(),
                                 job.shard_addresses().end());
  options.chunks =
      *PlaceChunks(layout.TensorSizes(), job.shard_addresses_size(),
                   kDefaultMaxChunkElements);
  options.rpc_timeout = absl::Seconds(5);
  options.retry.budget = absl::ZeroDuration();
  if (local.has_value()) options.in_process_shards[0] = *std::move(local);
  return *GrpcParameterClient::Create(std::move(options));
}

TEST(ShardHostTest, ItsOwnWorkerPullsInProcessOthersThroughTheLink) {
  v1::JobSpec job = ShardHostJob(1);
  LinkShaper shaper(*ParseLinkLimit("100Gbit", ""));
  ShardHostOptions options;
  options.listen = {"127.0.0.1:0"};
  options.shaper = &shaper;
  auto host = ShardHost::Start(job, std::move(options));
  ASSERT_TRUE(host.ok()) << host.status();
  job.set_shard_addresses(0, absl::StrCat("127.0.0.1:", (*host)->ports()[0]));
  const std::vector<float> expected =
      *JobDenseInitialSlice(job, 0, (*host)->parameters());

  std::unique_ptr<GrpcParameterClient> own =
      ClientOf(job, (*host)->InProcess(0));
  std::vector<float> params(own->num_elements(), -1.0f);
  absl::StatusOr<int64_t> pulled = own->Pull(0, params.data());
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(params, expected);
  EXPECT_EQ(shaper.stats().bytes_sent, 0);  // the shard shaped nothing
  EXPECT_EQ(own->bytes().received, 0);      // nothing crossed a socket
  EXPECT_GE(own->peer_bytes().at("ps0").received,
            static_cast<int64_t>(expected.size() * sizeof(float)));

  std::unique_ptr<GrpcParameterClient> other = ClientOf(job, std::nullopt);
  std::vector<float> theirs(other->num_elements(), -1.0f);
  ASSERT_TRUE(other->Pull(0, theirs.data()).ok());
  EXPECT_EQ(theirs, expected);
  EXPECT_GE(shaper.stats().bytes_sent,
            static_cast<int64_t>(expected.size() * sizeof(float)));
  EXPECT_GE(other->bytes().received,
            static_cast<int64_t>(expected.size() * sizeof(float)));
}

TEST(ShardHostTest, StopWritesTheLastCheckpoint) {
  const std::string dir = FreshDir("stop");
  ShardHostOptions options;
  options.listen = {"127.0.0.1:0"};
  options.checkpoint_dir = dir;
  v1::JobSpec job = ShardHostJob(1);
  auto host = ShardHost::Start(job, std::move(options));
  ASSERT_TRUE(host.ok()) << host.status();
  const auto files = [&] {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      n += e.path().extension() == ".ckpt" ? 1 : 0;
    }
    return n;
  };
  EXPECT_EQ(files(), 1);  // version 0, written at start
  ASSERT_TRUE((*host)->Stop(absl::Seconds(1)).ok());
  EXPECT_EQ(files(), 1);  // version 0 again: nothing was applied since
  EXPECT_TRUE((*host)->Stop().ok());  // idempotent
}

TEST(ShardHostTest, RefusesAProcessOrPartitionsTheJobDoesNotHave) {
  ShardHostOptions outside;
  outside.process_id = 1;
  outside.listen = {"127.0.0.1:0"};
  EXPECT_TRUE(absl::IsInvalidArgument(
      ShardHost::Start(ShardHostJob(1), outside).status()));
  ShardHostOptions partitions;
  partitions.listen = {"127.0.0.1:0", "127.0.0.1:0"};
  EXPECT_TRUE(absl::IsInvalidArgument(
      ShardHost::Start(ShardHostJob(3), partitions).status()));
}

}  // namespace
}  // namespace ferry

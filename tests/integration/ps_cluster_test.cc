// Multi-process PS training on loopback: real ferry-server and ferry-worker
// processes, real gRPC.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/sharding.h"
#include "ferry/v1/ps.grpc.pb.h"
#include "gtest/gtest.h"
#include "model/model_params.h"
#include "model/model_presets.h"
#include "proto/job_convert.h"
#include "proto/rpc_util.h"
#include "ps/ps_client.h"
#include "tests/integration/cluster_fixture.h"
#include "worker/standalone_trainer.h"

namespace ferry {
namespace {

absl::StatusOr<v1::ShardInfoResponse> ShardInfoAt(const std::string& address) {
  auto stub = v1::ParameterServer::NewStub(MakeChannel(address));
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(5));
  v1::ShardInfoResponse response;
  const grpc::Status status =
      stub->ShardInfo(&context, v1::ShardInfoRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

TEST(PsClusterTest, ThreeWorkersTwoShardsTrainAndTheLossFalls) {
  testing::ClusterSpec spec;
  spec.workers = 3;
  spec.shards = 2;
  spec.job_args = {"--max-steps", "80", "--epochs", "1", "--batch", "96"};
  auto cluster =
      testing::TestCluster::Start(spec, testing::ClusterLogDir("w3s2"));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto status = (*cluster)->WaitFinished(absl::Seconds(180));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->step(), 80);
  EXPECT_EQ(status->workers_seen(), 3);
  ASSERT_GE(status->evals_size(), 1);
  // Chance is 0.1 accuracy and loss ln(10) = 2.30.
  EXPECT_GT(status->evals(status->evals_size() - 1).test_accuracy(), 0.6);
  EXPECT_LT(status->evals(status->evals_size() - 1).test_loss(), 1.2);
  EXPECT_EQ(status->samples_applied(), 80 * 96);
  // Every worker pushes and pulls the whole model each step: bytes on the
  // wire per worker and step are 2 x 4 x 235146 plus framing (< 1%).
  int64_t worker_bytes = 0;
  for (const auto& [id, counts] : status->worker_bytes()) {
    for (const auto& [role, n] : counts.sent()) worker_bytes += n;
    for (const auto& [role, n] : counts.received()) worker_bytes += n;
  }
  const double per_step_per_worker =
      static_cast<double>(worker_bytes) / (80 * 3);
  EXPECT_NEAR(per_step_per_worker / (2.0 * 4 * 235146), 1.0, 0.01);
  // Per individual shard: the two shards add up to the role total and
  // carry equal halves (placement balanced by bytes).
  for (const auto& [id, counts] : status->worker_bytes()) {
    const auto& per_shard = status->worker_peer_bytes().at(id);
    ASSERT_EQ(per_shard.sent_size(), 2) << id;
    const int64_t s0 = per_shard.sent().at("ps0"),
                  s1 = per_shard.sent().at("ps1");
    EXPECT_EQ(s0 + s1, counts.sent().at("ps")) << id;
    EXPECT_EQ(per_shard.received().at("ps0") + per_shard.received().at("ps1"),
              counts.received().at("ps"))
        << id;
    EXPECT_NEAR(static_cast<double>(s0) / s1, 1.0, 0.05) << id;
  }
}

// Sync PS with 2 workers and global batch B applies exactly the updates of a
// single process with batch B over the same sample order: for an MLP, and
// for the ConvNet (convolutions, pooling, dropout masks by sample position),
// and with 2 partitions per shard process (4 logical shards, each applied on
// its own pushes: common/shard_partitions.h), and with shards that sum
// pushes on arrival (ps/arrival_sum.h).
struct EquivalenceCase {
  std::string model;
  int partitions = 1;
  bool sum_on_arrival = false;
};
void PrintTo(const EquivalenceCase& c, std::ostream* os) {
  *os << c.model << ", " << c.partitions << " partition(s) per shard"
      << (c.sum_on_arrival ? ", sum on arrival" : "");
}

class SyncPsEquivalenceTest : public ::testing::TestWithParam<EquivalenceCase> {
};

TEST_P(SyncPsEquivalenceTest, SyncPsMatchesSingleProcessWeights) {
  const std::string model = GetParam().model;
  const int steps = testing::EquivalenceSteps(model);
  ProgressPrinter quiet(stderr, false);
  auto reference =
      RunStandalone(testing::EquivalenceReference(steps, model), quiet);
  ASSERT_TRUE(reference.ok()) << reference.status();

  testing::ClusterSpec spec;
  spec.workers = 2;
  spec.shards = 2;
  spec.partitions = GetParam().partitions;
  spec.job_args = testing::EquivalenceJobArgs(steps, model);
  if (GetParam().sum_on_arrival) {
    spec.job_args.insert(spec.job_args.end(), {"--sum-on-arrival", "true"});
  }
  auto cluster = testing::TestCluster::Start(
      spec, testing::ClusterLogDir(
                absl::StrCat("equivalence-", model, "-k", spec.partitions,
                             GetParam().sum_on_arrival ? "-arrival" : "")));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto status = (*cluster)->WaitFinished(absl::Seconds(120));
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_EQ(status->step(), steps);

  auto layout = ModelParameterLayout(*ResolveModelSpec(model));
  ASSERT_TRUE(layout.ok()) << layout.status();
  const int logical_shards = spec.shards * spec.partitions;
  ASSERT_EQ((*cluster)->shard_addresses().size(),
            static_cast<size_t>(logical_shards));
  GrpcParameterClientOptions options;
  options.job_id = status->job().job_id();
  options.worker_id = "test";
  options.shard_addresses = (*cluster)->shard_addresses();
  // The job's placement (its chunks pack tensors: JobSpec.pack_chunks).
  auto chunks = JobChunks(status->job(), *layout);
  ASSERT_TRUE(chunks.ok()) << chunks.status();
  options.chunks = *std::move(chunks);
  auto client = GrpcParameterClient::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<float> weights(layout->total_elements());
  auto version = (*client)->Pull(steps, weights.data());
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, steps);
  ASSERT_EQ(weights.size(), reference->final_parameters.size());
  double max_diff = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(static_cast<double>(weights[i]) -
                                           reference->final_parameters[i]));
  }
  EXPECT_LT(max_diff, 1e-4) << "sync PS drifted from the single-process run";
  // Every logical shard applied every step on its own pushes.
  for (const std::string& address : (*cluster)->shard_addresses()) {
    auto info = ShardInfoAt(address);
    ASSERT_TRUE(info.ok()) << address << ": " << info.status();
    EXPECT_EQ(info->version(), steps) << address;
    EXPECT_GT(info->steps_finalized_on_push(), 0) << address;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, SyncPsEquivalenceTest,
    ::testing::Values(EquivalenceCase{"64-32-10", 1},
                      EquivalenceCase{"convnet", 1},
                      EquivalenceCase{"64-32-10", 2},
                      EquivalenceCase{"64-32-10", 1, true}),
    [](const ::testing::TestParamInfo<EquivalenceCase>& i) {
      const std::string name = i.param.model == "convnet" ? "convnet" : "mlp";
      return absl::StrCat(name,
                          i.param.partitions == 1
                              ? ""
                              : absl::StrCat("_partitions", i.param.partitions),
                          i.param.sum_on_arrival ? "_sum_on_arrival" : "");
    });

}  // namespace
}  // namespace ferry

namespace ferry {
namespace {

// --sync-quorum 2 of 3: each step is applied over the first two reports;
// the third worker's samples go back to the queue and are trained later, so
// every epoch still applies every sample exactly once.
TEST(PsClusterTest, SyncQuorumFinishesEveryEpochWithExactlyOnceAccounting) {
  testing::ClusterSpec spec;
  spec.workers = 3;
  spec.shards = 2;
  spec.job_args = {
      "--dataset", "synthetic:960", "--model", "64-32-10",      "--batch",
      "96",        "--epochs",      "2",       "--sync-quorum", "2"};
  auto cluster = testing::TestCluster::Start(
      spec, std::string(::testing::TempDir()) + "/ferry-quorum");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto status = (*cluster)->WaitFinished(absl::Seconds(180));
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_EQ(status->accounting_size(), 2);
  for (const auto& epoch : status->accounting()) {
    EXPECT_EQ(epoch.samples_applied(), 960) << "epoch " << epoch.epoch();
    EXPECT_EQ(epoch.samples_dropped(), 0) << "epoch " << epoch.epoch();
  }
  EXPECT_EQ(status->samples_applied(), 2 * 960);
  // Two of three contributors per step: more steps than 2 epochs of full ones.
  EXPECT_GE(status->step(), 2 * 10);
}

}  // namespace
}  // namespace ferry

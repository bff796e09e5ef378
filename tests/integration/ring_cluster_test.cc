// Multi-process ring all-reduce training on loopback: real ferry-server
// (coordinator) and ferry-worker processes, real gRPC between the workers.
#include <cmath>
#include <cstring>
#include <fstream>

#include "compute/compute_backend.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster_fixture.h"
#include "tests/testing/wait_until.h"
#include "worker/standalone_trainer.h"

namespace ferry {
namespace {

constexpr int64_t kMlpParams = 235146;  // 784-256-128-10

std::vector<float> ReadFloats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

TEST(RingClusterTest, ThreeWorkersTrainWithIdenticalWeightsAfterEveryStep) {
  testing::ClusterSpec spec;
  spec.mode = "ring";
  spec.workers = 3;
  const int steps = 60;
  spec.job_args = {
      "--max-steps", std::to_string(steps), "--epochs", "1", "--batch",
      "96",          "--digest-every",      "1"};
  auto cluster =
      testing::TestCluster::Start(spec, testing::ClusterLogDir("ring-w3"));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto status = (*cluster)->WaitFinished(absl::Seconds(180));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->step(), steps);
  EXPECT_EQ(status->samples_applied(), steps * 96);
  // Every step, the 2 other members' digests were compared with the first.
  EXPECT_EQ(status->digest_checks(), steps * 2);
  EXPECT_EQ(status->digest_mismatches(), 0);
  ASSERT_GE(status->evals_size(), 1);
  EXPECT_GT(status->evals(status->evals_size() - 1).test_accuracy(), 0.6);
  // Ring volume: each member sends 2(N-1)/N of the model per step, plus the
  // initial broadcast ((N-1) model copies in all) and at most the weights
  // fetched for evaluation (those after a member's last report are not in
  // its cumulative counts); the rest is framing (< 1%).
  int64_t peer_sent = 0;
  for (const auto& [id, counts] : status->worker_bytes()) {
    auto it = counts.sent().find("worker");
    if (it != counts.sent().end()) peer_sent += it->second;
  }
  const double model_bytes = 4.0 * kMlpParams;
  const double expected =
      steps * 3 * (2.0 * 2 / 3) * model_bytes + 2 * model_bytes;
  EXPECT_GE(peer_sent, expected);
  EXPECT_LT(peer_sent / (expected + status->evals_size() * model_bytes), 1.01);
}

// Ring all-reduce with 2 workers and global batch B applies the updates of
// a single process with batch B over the same sample order: for an MLP and
// for the ConvNet (dropout masks by sample position).
class RingEquivalenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RingEquivalenceTest, RingMatchesSingleProcessWeights) {
  const std::string model = GetParam();
  const int steps = testing::EquivalenceSteps(model);
  ProgressPrinter quiet(stderr, false);
  auto reference =
      RunStandalone(testing::EquivalenceReference(steps, model), quiet);
  ASSERT_TRUE(reference.ok()) << reference.status();

  const std::string dir = testing::ClusterLogDir("ring-equivalence-" + model);
  testing::ClusterSpec spec;
  spec.mode = "ring";
  spec.workers = 2;
  spec.job_args = testing::EquivalenceJobArgs(steps, model);
  spec.worker_args = {"--final-weights", dir + "/weights{i}.bin"};
  auto cluster = testing::TestCluster::Start(spec, dir);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto status = (*cluster)->WaitFinished(absl::Seconds(120));
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_EQ(status->step(), steps);
  // Workers exit after FINISH.
  const absl::Status exited = testutil::WaitUntil("both workers to exit", [&] {
    auto codes = (*cluster)->WorkerExitCodes();
    return codes[0].has_value() && codes[1].has_value();
  });
  EXPECT_TRUE(exited.ok()) << exited;
  for (const auto& code : (*cluster)->WorkerExitCodes()) {
    EXPECT_EQ(code.value_or(-1), 0);
  }
  const std::vector<float> w0 = ReadFloats(dir + "/weights0.bin");
  const std::vector<float> w1 = ReadFloats(dir + "/weights1.bin");
  ASSERT_EQ(w0.size(), reference->final_parameters.size());
  ASSERT_EQ(w1.size(), w0.size());
  EXPECT_EQ(0, std::memcmp(w0.data(), w1.data(), w0.size() * sizeof(float)))
      << "ring members ended with different weights";
  double max_diff = 0;
  for (size_t i = 0; i < w0.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(static_cast<double>(w0[i]) -
                                           reference->final_parameters[i]));
  }
  EXPECT_LT(max_diff, 1e-4) << "ring drifted from the single-process run";
}

INSTANTIATE_TEST_SUITE_P(Models, RingEquivalenceTest,
                         ::testing::Values("64-32-10", "convnet"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           return i.param == "convnet" ? std::string("convnet")
                                                       : std::string("mlp");
                         });

}  // namespace
}  // namespace ferry

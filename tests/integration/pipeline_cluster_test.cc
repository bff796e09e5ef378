// Pipeline jobs on loopback (docs/pipeline.md): real ferry-server and
// ferry-worker processes in ring and sync PS mode with --pipeline-stages,
// stage links over the workers' RingPeer gRPC streams.
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "client/pipeline_cost_model.h"
#include "gtest/gtest.h"
#include "model/model_presets.h"
#include "nlohmann/json.hpp"
#include "tests/integration/cluster_fixture.h"
#include "tests/testing/wait_until.h"
#include "worker/standalone_trainer.h"

namespace ferry {
namespace {

std::vector<float> ReadFloats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

struct PipelineCase {
  std::string model;
  int workers = 4;
  std::string schedule;
  // The ConvNet: 3 steps. Micro-batches change the last bits of the Linear
  // layers' GEMMs (4e-7 after 3 steps); around step 4 one such difference
  // flips a max-pool or ReLU decision and the weights part by ~2e-4 by
  // step 6, in one process as well (docs/pipeline.md).
  int steps = 6;
  std::string mode = "ring";  // or "ps": 2 shards, sync
  // Non-empty: --worker-memory-budget (PS: whole replicas train, a member
  // left over waits as a spare).
  std::string budget{};
  // The members that train: with a budget in PS mode, whole replicas only.
  int trained() const {
    return mode == "ps" && !budget.empty() ? workers / 2 * 2 : workers;
  }
};

// 2 stages x 4 micro-batches: the weights every member ends with equal a
// single process's with the same global batch and sample order, within
// 1e-4, and (ring) all members agree bit for bit (digests every step).
class PipelineEquivalenceTest : public ::testing::TestWithParam<PipelineCase> {
 protected:
  // The cost model's prediction for one replica of `c`'s job: the global
  // batch of 40 is split over the ranks (the first batch % W one more), a
  // replica trains its two ranks' shares.
  const PipelineCostPrediction& Predicted(const PipelineCase& c,
                                          const ModelDef& def) {
    if (!predicted_.has_value()) {
      int64_t replica_batch = 0;
      for (int r = 0; r < 2; ++r) {
        replica_batch += 40 / c.trained() + (r < 40 % c.trained() ? 1 : 0);
      }
      PipelineCostInput in;
      in.def = def;
      in.pipeline.stages = 2;
      in.pipeline.micro_batches = 4;
      in.batch = replica_batch;
      in.link.workers = 2;
      auto p = PredictPipelineStep(in);
      EXPECT_TRUE(p.ok()) << p.status();
      predicted_ = p.ok() ? *p : PipelineCostPrediction{};
      predicted_->stages.resize(2);
    }
    return *predicted_;
  }
  std::optional<PipelineCostPrediction> predicted_;
};

TEST_P(PipelineEquivalenceTest, MatchesSingleProcessWeights) {
  const PipelineCase& c = GetParam();
  const int steps = c.steps;
  ProgressPrinter quiet(stderr, false);
  auto reference =
      RunStandalone(testing::EquivalenceReference(steps, c.model), quiet);
  ASSERT_TRUE(reference.ok()) << reference.status();
  auto reference_def = ResolveModelSpec(c.model);
  ASSERT_TRUE(reference_def.ok()) << reference_def.status();
  const ModelDef& reference_model = *reference_def;

  const std::string dir = testing::ClusterLogDir(absl::StrCat(
      "pipeline-", c.mode, "-", c.model, "-", c.schedule, "-w", c.workers));
  const bool ring = c.mode == "ring";
  testing::ClusterSpec spec;
  spec.mode = c.mode;
  spec.workers = c.workers;
  spec.job_args = testing::EquivalenceJobArgs(steps, c.model);
  spec.job_args.insert(spec.job_args.end(),
                       {"--pipeline-stages", "2", "--micro-batches", "4",
                        "--pipeline-schedule", c.schedule});
  if (ring) spec.job_args.insert(spec.job_args.end(), {"--digest-every", "1"});
  if (!c.budget.empty()) {
    spec.job_args.insert(spec.job_args.end(),
                         {"--worker-memory-budget", c.budget});
  }
  spec.worker_args = {"--final-weights", dir + "/weights{i}.bin",
                      "--summary-json", dir + "/worker{i}.json"};
  auto cluster = testing::TestCluster::Start(spec, dir);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto status = (*cluster)->WaitFinished(absl::Seconds(180));
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_EQ(status->step(), steps);
  EXPECT_EQ(status->samples_applied(), int64_t{steps} * 40);  // batch 40
  if (ring) {
    // One digest per stage range and holder: with one replica (W = P = 2)
    // both members hold both stages (the whole buffer is all-reduced);
    // with more members each stage has its ring of the stage's members and
    // those training alone.
    const int holders =
        c.workers <= 2 ? c.workers : c.workers / 2 + c.workers % 2;
    EXPECT_EQ(status->digest_checks(), steps * 2 * (holders - 1));
    EXPECT_EQ(status->digest_mismatches(), 0);
  }
  // Workers exit after FINISH.
  const absl::Status exited = testutil::WaitUntil("every worker to exit", [&] {
    auto codes = (*cluster)->WorkerExitCodes();
    return std::all_of(codes.begin(), codes.end(),
                       [](const auto& code) { return code.has_value(); });
  });
  EXPECT_TRUE(exited.ok()) << exited;
  for (const auto& code : (*cluster)->WorkerExitCodes()) {
    EXPECT_EQ(code.value_or(-1), 0);
  }
  int spares = 0;
  for (int i = 0; i < c.workers; ++i) {
    const std::vector<float> w =
        ReadFloats(dir + "/weights" + std::to_string(i) + ".bin");
    ASSERT_EQ(w.size(), reference->final_parameters.size()) << "worker " << i;
    double max_diff = 0;
    for (size_t k = 0; k < w.size(); ++k) {
      max_diff = std::max(max_diff, std::abs(static_cast<double>(w[k]) -
                                             reference->final_parameters[k]));
    }
    EXPECT_LT(max_diff, 1e-4) << "worker " << i << " drifted";
    // Its summary names the role it trained in every step.
    std::ifstream in(dir + "/worker" + std::to_string(i) + ".json");
    const nlohmann::json summary = nlohmann::json::parse(in, nullptr, false);
    ASSERT_TRUE(summary.contains("pipeline")) << summary.dump(1);
    const nlohmann::json& p = summary["pipeline"];
    int64_t role_steps = 0;
    for (const auto& [role, n] : p["steps_by_role"].items()) {
      role_steps += n.get<int64_t>();
    }
    if (role_steps == 0 && c.trained() < c.workers) {
      ++spares;  // waited all along; its final weights are the shards'
      continue;
    }
    EXPECT_EQ(role_steps, steps) << p.dump(1);
    EXPECT_GT(p["busy_seconds"].get<double>(), 0.0) << p.dump(1);
    if (p["steps_by_role"].contains("alone")) continue;
    // Its bytes to and from its neighbours are what the cost model
    // predicts for its stage (membership is fixed: one role all along).
    ASSERT_EQ(p["steps_by_role"].size(), 1u) << p.dump(1);
    const int stage =
        p["steps_by_role"].items().begin().key() == "stage 0 of 2" ? 0 : 1;
    const PipelineCostPrediction& predicted = Predicted(c, reference_model);
    EXPECT_EQ(p["neighbour_bytes_sent"].get<int64_t>(),
              steps * predicted.stages[stage].neighbour_bytes_sent)
        << p.dump(1);
    EXPECT_EQ(p["neighbour_bytes_received"].get<int64_t>(),
              steps * predicted.stages[stage].neighbour_bytes_received)
        << p.dump(1);
    if (!ring) {
      // PS: the chunks outside its layers travel as flags, so a stage
      // pushes at most its own parameters' bytes (+ framing), not the
      // model's (fewer when a chunk of its own gradient is all zeros: the
      // ConvNet's dead ReLU units).
      const int64_t own = int64_t{4} * predicted.stages[stage].params;
      const int64_t pushed = summary["bytes"]["ps"]["sent"].get<int64_t>();
      EXPECT_GT(pushed, 0) << summary.dump(1);
      EXPECT_LE(pushed, steps * (own + 2048)) << summary.dump(1);
      // It pulls only its layers each step; the one whole pull is the
      // final weights' (--final-weights).
      const int64_t model = int64_t{4} * (predicted.stages[0].params +
                                          predicted.stages[1].params);
      const int64_t pulled = summary["bytes"]["ps"]["received"].get<int64_t>();
      EXPECT_LE(pulled, (steps + 1) * (own + 2048) + model + 4096)
          << summary.dump(1);
      // Its parameter and gradient buffers hold its layers only (CPU:
      // one fp32 copy of each).
      EXPECT_EQ(p["peak_buffer_bytes"].get<int64_t>(), 2 * own) << p.dump(1);
    } else {
      EXPECT_EQ(
          p["peak_buffer_bytes"].get<int64_t>(),
          int64_t{8} * static_cast<int64_t>(reference->final_parameters.size()))
          << p.dump(1);
    }
  }
  EXPECT_EQ(spares, c.workers - c.trained());
}

INSTANTIATE_TEST_SUITE_P(
    Models, PipelineEquivalenceTest,
    ::testing::Values(PipelineCase{"64-32-10", 2, "1f1b"},
                      PipelineCase{"64-32-10", 3, "gpipe"},
                      PipelineCase{"convnet", 4, "1f1b", 3},
                      PipelineCase{"64-32-10", 2, "1f1b", 6, "ps"},
                      PipelineCase{"64-32-10", 3, "gpipe", 6, "ps"},
                      PipelineCase{"convnet", 4, "1f1b", 3, "ps"},
                      PipelineCase{"64-32-10", 3, "1f1b", 6, "ps", "1MiB"}),
    [](const ::testing::TestParamInfo<PipelineCase>& i) {
      return i.param.mode + "_" +
             (i.param.model == "convnet" ? "convnet" : "mlp") + "_w" +
             std::to_string(i.param.workers) + "_" + i.param.schedule +
             (i.param.budget.empty() ? "" : "_budget");
    });

}  // namespace
}  // namespace ferry

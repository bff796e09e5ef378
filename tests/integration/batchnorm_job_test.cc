// A model with BatchNorm trains in sync PS and in ring mode: the running
// statistics travel with the gradients (the sample-weighted mean change of
// each step), so both modes end with the same state as well as the same
// parameters, every BatchNorm layer counts every step, the job's evaluation
// reads the state, and the export holds it under PyTorch's names.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/child_process.h"
#include "coordinator/test_set_evaluator.h"
#include "data/data_source.h"
#include "gtest/gtest.h"
#include "model/model_export.h"
#include "model/model_params.h"
#include "nlohmann/json.hpp"
#include "tests/testing/process_run.h"

namespace ferry {
namespace {

constexpr int kSteps = 6;

// Conv - BatchNorm2d - ReLU - Flatten - Linear - BatchNorm1d - ReLU - Linear
// on 28x28 inputs: both kinds of BatchNorm, state tensors 2 x (2C + 1).
constexpr char kModel[] = R"({"format": "ferry.model.v1",
  "input": {"shape": [1, 28, 28]}, "classes": 10, "layers": [
    {"type": "Conv2d", "args": {"in_channels": 1, "out_channels": 4,
                                "kernel_size": 3, "stride": 2}},
    {"type": "BatchNorm2d", "args": {"num_features": 4}},
    {"type": "ReLU"},
    {"type": "Flatten"},
    {"type": "Linear", "args": {"in_features": 676, "out_features": 16}},
    {"type": "BatchNorm1d", "args": {"num_features": 16}},
    {"type": "ReLU"},
    {"type": "Linear", "args": {"in_features": 16, "out_features": 10}}]})";

class BatchNormJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/batchnorm-job-", getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ + "/model.json") << kModel;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs `ferry local` in `mode` (2 workers; PS: 2 shards, sync) for kSteps
  // steps of the same global batches; returns its summary. `micro_batches`
  // > 0: 4 workers as 2 replicas of a 2-stage pipeline, in that many
  // micro-batches. Its export is in dir_/<mode>-<compression>[-pM]/model.
  nlohmann::json RunJob(const std::string& mode,
                        const std::string& compression = "none",
                        int micro_batches = 0) {
    const std::string out =
        dir_ + "/" + mode + "-" + compression +
        (micro_batches > 0 ? absl::StrCat("-p", micro_batches) : "");
    std::vector<std::string> argv = {std::string(FERRY_BIN_DIR) + "/ferry",
                                     "local",
                                     "--mode",
                                     mode,
                                     "--workers",
                                     micro_batches > 0 ? "4" : "2",
                                     "--model",
                                     dir_ + "/model.json",
                                     "--dataset",
                                     "synthetic:600",
                                     "--batch",
                                     "40",
                                     "--epochs",
                                     "1",
                                     "--max-steps",
                                     std::to_string(kSteps),
                                     "--device",
                                     "cpu",
                                     "--optimizer",
                                     "momentum",
                                     "--nesterov",
                                     "false",
                                     "--lr",
                                     "0.05",
                                     "--warmup-steps",
                                     "2",
                                     "--weight-decay",
                                     "0",
                                     "--export",
                                     out + "/model",
                                     "--summary-json",
                                     out + "/summary.json",
                                     "--log-dir",
                                     out + "/logs",
                                     "--timeout",
                                     "150"};
    if (mode == "ps") argv.insert(argv.end(), {"--shards", "2"});
    argv.insert(argv.end(), {"--compression", compression});
    if (micro_batches > 0) {
      argv.insert(argv.end(), {"--pipeline-stages", "2", "--micro-batches",
                               std::to_string(micro_batches)});
    }
    auto child = ChildProcess::Spawn(argv, out + ".log");
    EXPECT_TRUE(child.ok()) << child.status();
    if (!child.ok()) return {};
    const std::optional<int> rc =
        testing::AwaitExit(*child, absl::Seconds(180));
    std::ifstream log(out + ".log");
    const std::string output((std::istreambuf_iterator<char>(log)),
                             std::istreambuf_iterator<char>());
    EXPECT_EQ(*rc, 0) << output;
    std::ifstream in(out + "/summary.json");
    EXPECT_TRUE(in) << "no summary\n" << output;
    return in ? nlohmann::json::parse(in, nullptr, false) : nlohmann::json();
  }

  std::string dir_;
};

double MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
  }
  return diff;
}

TEST_F(BatchNormJobTest, PsAndRingKeepTheSameRunningStatisticsAndEvaluateThem) {
  const nlohmann::json ps_summary = RunJob("ps");
  const nlohmann::json ring_summary = RunJob("ring");
  ASSERT_TRUE(ps_summary.is_object() && ring_summary.is_object());
  auto ps = ImportModel(dir_ + "/ps-none/model");
  auto ring = ImportModel(dir_ + "/ring-none/model");
  ASSERT_TRUE(ps.ok()) << ps.status();
  ASSERT_TRUE(ring.ok()) << ring.status();

  // Same math in both modes: parameters and state agree.
  EXPECT_LT(MaxDiff(ps->params, ring->params), 1e-4);
  EXPECT_LT(MaxDiff(ps->state, ring->state), 1e-4);

  // The state moved: every layer counted every step, the statistics left
  // their initial values (mean 0, variance 1).
  auto state_layout = ModelStateLayout(ps->def);
  ASSERT_TRUE(state_layout.ok());
  const std::vector<float> initial = ModelInitialState(ps->def, *state_layout);
  for (const TensorSlot& t : state_layout->tensors()) {
    for (const ModelValues* values : {&*ps, &*ring}) {
      const float* v = values->state.data() + t.offset;
      if (t.name.ends_with("num_batches_tracked")) {
        EXPECT_EQ(*v, kSteps) << t.name;
        continue;
      }
      double moved = 0;
      for (int64_t i = 0; i < t.numel; ++i) {
        moved = std::max<double>(moved, std::abs(v[i] - initial[t.offset + i]));
      }
      EXPECT_GT(moved, 1e-3) << t.name << " never moved";
    }
  }

  // The job's final evaluation read the state: evaluating the exported
  // values gives its figures, evaluating them with the initial state does
  // not.
  auto data = LoadTrainTest("synthetic:600", "", ps->def, 1);
  ASSERT_TRUE(data.ok()) << data.status();
  auto evaluator = TestSetEvaluator::Create(ps->def, data->test);
  ASSERT_TRUE(evaluator.ok()) << evaluator.status();
  std::vector<float> values = ps->params;
  values.insert(values.end(), ps->state.begin(), ps->state.end());
  auto with_state = (*evaluator)->Evaluate(values.data());
  ASSERT_TRUE(with_state.ok()) << with_state.status();
  const nlohmann::json& last = ps_summary["evals"].back();
  EXPECT_TRUE(last["final"].get<bool>());
  EXPECT_NEAR(with_state->accuracy, last["test_accuracy"].get<double>(), 1e-9);
  EXPECT_NEAR(with_state->loss, last["test_loss"].get<double>(), 1e-5);
  std::copy(initial.begin(), initial.end(),
            values.begin() + static_cast<int64_t>(ps->params.size()));
  auto without = (*evaluator)->Evaluate(values.data());
  ASSERT_TRUE(without.ok());
  EXPECT_GT(std::abs(without->loss - with_state->loss), 1e-3)
      << "the evaluation does not depend on the running statistics";
}

// The state's changes travel uncompressed: with top-k keeping 1 % of the
// gradient (which would defer most of the state to later steps), every
// layer still counts exactly every step.
TEST_F(BatchNormJobTest, CompressedJobsSendTheStateExactly) {
  for (const std::string mode : {"ps", "ring"}) {
    const nlohmann::json summary = RunJob(mode, "topk:0.01");
    ASSERT_TRUE(summary.is_object()) << mode;
    auto exported = ImportModel(dir_ + "/" + mode + "-topk:0.01/model");
    ASSERT_TRUE(exported.ok()) << exported.status();
    auto state_layout = ModelStateLayout(exported->def);
    ASSERT_TRUE(state_layout.ok());
    for (const TensorSlot& t : state_layout->tensors()) {
      if (t.name.ends_with("num_batches_tracked")) {
        EXPECT_EQ(exported->state[t.offset], kSteps) << mode << " " << t.name;
      }
    }
  }
}

// Pipeline stages (2 replicas x 2 stages, each stage with a BatchNorm):
// with one micro-batch a replica's stages see the samples one data-parallel
// worker of a 2-worker job sees, so ring and PS pipelines end with that
// job's parameters and state (the stage rings plus the ring of every member
// over the state; the PS stages' own buffers of parameters and state);
// with M micro-batches every BatchNorm counts M per step, also when the
// stage rings compress their gradients (the state goes exact).
TEST_F(BatchNormJobTest, PipelineStagesKeepTheRunningStatistics) {
  ASSERT_TRUE(RunJob("ring").is_object());
  auto plain = ImportModel(dir_ + "/ring-none/model");
  ASSERT_TRUE(plain.ok()) << plain.status();
  for (const std::string mode : {"ring", "ps"}) {
    const nlohmann::json summary = RunJob(mode, "none", 1);
    ASSERT_TRUE(summary.is_object()) << mode;
    ASSERT_TRUE(summary.contains("pipeline")) << summary.dump(1);
    auto staged = ImportModel(dir_ + "/" + mode + "-none-p1/model");
    ASSERT_TRUE(staged.ok()) << staged.status();
    EXPECT_LT(MaxDiff(staged->params, plain->params), 1e-4) << mode;
    EXPECT_LT(MaxDiff(staged->state, plain->state), 1e-4) << mode;
  }
  // Compressed stage rings: the state ring still sends the state exactly.
  ASSERT_TRUE(RunJob("ring", "topk:0.01", 2).is_object());
  auto two = ImportModel(dir_ + "/ring-topk:0.01-p2/model");
  ASSERT_TRUE(two.ok()) << two.status();
  auto state_layout = ModelStateLayout(two->def);
  ASSERT_TRUE(state_layout.ok());
  for (const TensorSlot& t : state_layout->tensors()) {
    if (t.name.ends_with("num_batches_tracked")) {
      EXPECT_EQ(two->state[t.offset], 2 * kSteps) << t.name;
    }
  }
}

}  // namespace
}  // namespace ferry

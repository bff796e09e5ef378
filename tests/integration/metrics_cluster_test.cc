// `ferry local --metrics-jsonl --tensorboard-dir` end to end: real
// processes, both modes, small synthetic job.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace ferry {
namespace {

namespace fs = std::filesystem;

class MetricsClusterTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MetricsClusterTest, LocalRunWritesJsonlAndAnEventFile) {
  const std::string mode = GetParam();
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("ferry-metrics-" + mode);
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path jsonl = dir / "metrics.jsonl";
  const fs::path tb = dir / "tb" / mode;
  const int steps = 15;
  const std::string command =
      std::string(FERRY_BIN_DIR) + "/ferry local --mode " + mode +
      " --workers 2 --shards 1 --dataset synthetic:600 --model 64-32-10 "
      "--batch 40 --epochs 1"
      " --max-steps " +
      std::to_string(steps) + " --timeout 120 --log-dir " +
      (dir / "logs").string() + " --metrics-jsonl " + jsonl.string() +
      " --tensorboard-dir " + tb.string() + " > " + (dir / "out.txt").string() +
      " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << "see " << (dir / "out.txt");

  std::ifstream in(jsonl);
  std::string line;
  std::vector<nlohmann::json> step_lines, eval_lines;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line);
    (j["kind"] == "step" ? step_lines : eval_lines).push_back(j);
  }
  ASSERT_EQ(step_lines.size(), static_cast<size_t>(steps));
  int64_t last_sent = 0;
  for (size_t i = 0; i < step_lines.size(); ++i) {
    EXPECT_EQ(step_lines[i]["step"], static_cast<int64_t>(i) + 1);
    EXPECT_EQ(step_lines[i]["mode"], mode);
    EXPECT_EQ(step_lines[i]["samples"], 40);
    EXPECT_GT(step_lines[i]["train_loss"].get<double>(), 0.0);
    EXPECT_GE(step_lines[i]["bytes_sent"].get<int64_t>(), last_sent);
    last_sent = step_lines[i]["bytes_sent"].get<int64_t>();
  }
  EXPECT_GT(last_sent, 0);
  ASSERT_EQ(eval_lines.size(), 1u);
  EXPECT_EQ(eval_lines[0]["final"], true);
  EXPECT_EQ(eval_lines[0]["step"], steps);

  std::vector<fs::path> events;
  for (const auto& e : fs::directory_iterator(tb)) events.push_back(e.path());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].filename().string().rfind("events.out.tfevents.", 0), 0u);
  // File version record + one per step + the evaluation, each >= 16 bytes.
  EXPECT_GT(fs::file_size(events[0]), 16u * (steps + 2));
}

INSTANTIATE_TEST_SUITE_P(Modes, MetricsClusterTest,
                         ::testing::Values("ps", "ring"));

}  // namespace
}  // namespace ferry

// `ferry local --max-steps N` ends the job cleanly in every mode: the workers
// stop after N steps, the final evaluation runs on step N's weights, the
// summary is written and ferry local exits 0 (without waiting for the
// no-worker grace or failing with "the job is unfinished").
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/child_process.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/process_run.h"

namespace ferry {
namespace {

struct MaxStepsCase {
  std::string mode;
  std::string consistency;
};

class LocalMaxStepsTest : public ::testing::TestWithParam<MaxStepsCase> {};

TEST_P(LocalMaxStepsTest, EndsWithAFinalEvaluationAndASummary) {
  const MaxStepsCase& c = GetParam();
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/max-steps-", c.mode, "-",
                   c.consistency, "-", getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  constexpr int kSteps = 12;
  std::vector<std::string> argv = {
      std::string(FERRY_BIN_DIR) + "/ferry", "local", "--mode", c.mode,
      "--workers", "2", "--consistency", c.consistency, "--dataset",
      "synthetic:3000", "--batch", "64", "--epochs", "5", "--device", "cpu",
      "--max-steps", std::to_string(kSteps),
      // Long enough that a job left waiting for it fails the time check.
      "--no-worker-grace", "120", "--summary-json", dir + "/summary.json",
      "--log-dir", dir + "/logs", "--timeout", "150"};
  if (c.mode == "ps") argv.insert(argv.end(), {"--shards", "2"});
  const absl::Time start = absl::Now();
  auto child = ChildProcess::Spawn(argv, dir + "/ferry-local.log");
  ASSERT_TRUE(child.ok()) << child.status();
  const std::optional<int> rc = testing::AwaitExit(*child, absl::Seconds(180));
  const absl::Duration took = absl::Now() - start;
  std::ifstream log(dir + "/ferry-local.log");
  const std::string output((std::istreambuf_iterator<char>(log)),
                           std::istreambuf_iterator<char>());
  ASSERT_EQ(*rc, 0) << output;
  EXPECT_LT(took, absl::Seconds(100)) << "waited for the no-worker grace";

  std::ifstream in(dir + "/summary.json");
  ASSERT_TRUE(in) << "no summary written\n" << output;
  const nlohmann::json s = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(s.is_discarded());
  if (c.consistency == "sync") {
    EXPECT_EQ(s["steps"].get<int64_t>(), kSteps);
  } else {
    // Async: a push already in flight when the job ends is still applied.
    EXPECT_GE(s["steps"].get<int64_t>(), kSteps);
    EXPECT_LE(s["steps"].get<int64_t>(), kSteps + 2);
  }
  ASSERT_FALSE(s["evals"].empty()) << s.dump();
  const nlohmann::json& last = s["evals"].back();
  EXPECT_TRUE(last["final"].get<bool>()) << last.dump();
  if (c.consistency == "sync") {
    EXPECT_EQ(last["step"].get<int64_t>(), kSteps);
  }
  EXPECT_GT(last["test_accuracy"].get<double>(), 0.0);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    EveryMode, LocalMaxStepsTest,
    ::testing::Values(MaxStepsCase{"ps", "sync"}, MaxStepsCase{"ps", "async"},
                      MaxStepsCase{"ring", "sync"}),
    [](const ::testing::TestParamInfo<MaxStepsCase>& info) {
      return info.param.mode + "_" + info.param.consistency;
    });

}  // namespace
}  // namespace ferry

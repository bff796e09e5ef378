#include "common/metrics_jsonl.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

std::vector<nlohmann::json> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> lines;
  std::string line;
  while (std::getline(in, line)) {
    EXPECT_TRUE(nlohmann::json::accept(line)) << line;
    lines.push_back(nlohmann::json::parse(line, nullptr, false));
  }
  return lines;
}

class JsonlMetricsSinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("ferry_jsonl_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = dir_ + "/metrics.jsonl";
  }
  void TearDown() override { fs::remove_all(dir_); }

  static StepMetrics Step(int64_t n) {
    StepMetrics m;
    m.step = n;
    m.time = absl::FromUnixSeconds(1700000000) + absl::Seconds(n);
    m.elapsed_seconds = 1.5 * n;
    m.epoch = 0;
    m.mode = "ring";
    m.train_loss = 1.0 / n;
    m.train_accuracy = 0.1 * n;
    m.samples = 128;
    m.workers = 2;
    m.bytes_sent = 1000 * n;
    m.bytes_received = 2000 * n;
    m.bytes_workers = 2;
    m.step_seconds = 0.25;
    m.compute_seconds = 0.125;
    m.comm_seconds = 0.0625;
    return m;
  }

  std::string dir_, path_;
};

TEST_F(JsonlMetricsSinkTest, WritesOneParseableLinePerPointWithTheKeys) {
  auto sink = JsonlMetricsSink::Open(path_);
  ASSERT_TRUE(sink.ok()) << sink.status();
  (*sink)->RecordStep(Step(1));
  (*sink)->RecordStep(Step(2));
  EvalMetrics eval;
  eval.step = 2;
  eval.time = absl::Now();
  eval.final = true;
  eval.mode = "ring";
  eval.test_accuracy = 0.75;
  eval.test_loss = 0.5;
  (*sink)->RecordEval(eval);
  // Flushed per line: readable before the sink closes.
  const std::vector<nlohmann::json> lines = ReadLines(path_);
  ASSERT_EQ(lines.size(), 3u);
  for (const char* key :
       {"kind", "step", "unix_seconds", "elapsed_seconds", "epoch", "mode",
        "train_loss", "train_accuracy", "lr", "samples", "workers",
        "bytes_sent", "bytes_received", "bytes_workers", "step_seconds",
        "compute_seconds", "comm_seconds"}) {
    EXPECT_TRUE(lines[0].contains(key)) << key;
  }
  EXPECT_EQ(lines[0]["kind"], "step");
  EXPECT_EQ(lines[1]["step"], 2);
  EXPECT_EQ(lines[1]["mode"], "ring");
  EXPECT_EQ(lines[1]["bytes_sent"], 2000);
  EXPECT_DOUBLE_EQ(lines[1]["train_loss"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(lines[1]["unix_seconds"].get<double>(), 1700000002.0);
  EXPECT_EQ(lines[2]["kind"], "eval");
  EXPECT_EQ(lines[2]["final"], true);
  EXPECT_DOUBLE_EQ(lines[2]["test_accuracy"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(lines[2]["test_loss"].get<double>(), 0.5);
  EXPECT_FALSE(lines[2].contains("test_auc")) << "a dense model has no AUC";
}

TEST_F(JsonlMetricsSinkTest, CtrEvaluationsCarryTheirAuc) {
  auto sink = JsonlMetricsSink::Open(path_);
  ASSERT_TRUE(sink.ok()) << sink.status();
  EvalMetrics eval;
  eval.step = 7;
  eval.time = absl::Now();
  eval.mode = "ps";
  eval.test_accuracy = 0.75;
  eval.test_loss = 0.45;
  eval.test_auc = 0.8125;
  (*sink)->RecordEval(eval);
  const std::vector<nlohmann::json> lines = ReadLines(path_);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_DOUBLE_EQ(lines[0]["test_auc"].get<double>(), 0.8125);
  EXPECT_DOUBLE_EQ(lines[0]["test_loss"].get<double>(), 0.45);
  EXPECT_DOUBLE_EQ(lines[0]["test_accuracy"].get<double>(), 0.75);
}

TEST_F(JsonlMetricsSinkTest, ReopeningAppends) {
  {
    auto sink = JsonlMetricsSink::Open(path_);
    ASSERT_TRUE(sink.ok());
    (*sink)->RecordStep(Step(1));
  }
  {
    auto sink = JsonlMetricsSink::Open(path_);  // a restarted coordinator
    ASSERT_TRUE(sink.ok());
    (*sink)->RecordStep(Step(2));
  }
  const std::vector<nlohmann::json> lines = ReadLines(path_);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["step"], 1);
  EXPECT_EQ(lines[1]["step"], 2);
}

TEST_F(JsonlMetricsSinkTest, NonFiniteLossStaysValidJson) {
  auto sink = JsonlMetricsSink::Open(path_);
  ASSERT_TRUE(sink.ok());
  StepMetrics m = Step(1);
  m.train_loss = std::numeric_limits<double>::quiet_NaN();
  m.comm_seconds = std::numeric_limits<double>::infinity();
  (*sink)->RecordStep(m);
  const std::vector<nlohmann::json> lines = ReadLines(path_);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(lines[0]["train_loss"].is_null());
}

TEST_F(JsonlMetricsSinkTest, MissingDirectoryIsNotFoundNamingThePath) {
  const std::string bad = dir_ + "/missing/metrics.jsonl";
  auto sink = JsonlMetricsSink::Open(bad);
  ASSERT_FALSE(sink.ok());
  EXPECT_TRUE(absl::IsNotFound(sink.status())) << sink.status();
  EXPECT_NE(sink.status().message().find(bad), std::string::npos);
  auto both = OpenMetricsSinks(bad, "");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("--metrics-jsonl"), std::string::npos);
}

TEST_F(JsonlMetricsSinkTest, UnwritableDirectoryIsPermissionDenied) {
  if (geteuid() == 0) GTEST_SKIP() << "root writes anywhere";
  const std::string ro = dir_ + "/ro";
  fs::create_directories(ro);
  ASSERT_EQ(chmod(ro.c_str(), 0500), 0);
  auto sink = JsonlMetricsSink::Open(ro + "/metrics.jsonl");
  chmod(ro.c_str(), 0700);
  ASSERT_FALSE(sink.ok());
  EXPECT_TRUE(absl::IsPermissionDenied(sink.status())) << sink.status();
}

TEST_F(JsonlMetricsSinkTest, NoFlagsNoSink) {
  auto none = OpenMetricsSinks("", "");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
  auto both = OpenMetricsSinks(path_, dir_ + "/tb");
  ASSERT_TRUE(both.ok()) << both.status();
  ASSERT_NE(*both, nullptr);
  (*both)->RecordStep(Step(3));
  EXPECT_EQ(ReadLines(path_).size(), 1u);
  EXPECT_TRUE(fs::exists(dir_ + "/tb"));
}

TEST_F(JsonlMetricsSinkTest, CheckMetricsPathsStartsNoEventFile) {
  EXPECT_TRUE(CheckMetricsPaths(path_, dir_ + "/tb/run").ok());
  EXPECT_TRUE(fs::is_directory(dir_ + "/tb/run"));
  EXPECT_TRUE(fs::is_empty(dir_ + "/tb/run"));
  EXPECT_TRUE(absl::IsNotFound(CheckMetricsPaths(dir_ + "/no/m.jsonl", "")));
  std::ofstream(dir_ + "/file") << "x";
  const absl::Status bad = CheckMetricsPaths("", dir_ + "/file/sub");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("--tensorboard-dir"), std::string::npos) << bad;
}

}  // namespace
}  // namespace ferry

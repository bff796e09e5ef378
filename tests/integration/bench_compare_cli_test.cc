// `ferry bench compare` end to end: a tiny sweep of real `ferry local` jobs
// (a PS run on an emulated link, a ring run, and their loopback baselines)
// produces every report file, with measured bytes matching the model, and
// passes every physical check (--strict fails the command otherwise).
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace ferry {
namespace {

namespace fs = std::filesystem;

TEST(BenchCompareCliTest, TinySweepWritesEveryReportAndBytesMatchTheModel) {
  const fs::path dir = fs::path(::testing::TempDir()) / "ferry-bench-compare";
  fs::remove_all(dir);
  const std::string command =
      std::string(FERRY_BIN_DIR) +
      "/ferry bench compare --models 64-32-10 --modes ps,ring --workers 2 "
      "--shards 2"
      " --bandwidth 100Mbit --latency 0 --batch 32 --warmup-steps 2 --steps 6"
      " --run-timeout 120 --strict --plot-script " FERRY_SOURCE_DIR
      "/bench/plot_compare.py --out " +
      dir.string() + " > " + (dir.string() + ".log") + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0)
      << "see " << dir.string() << ".log";

  std::ifstream in(dir / "results.json");
  const nlohmann::json results = nlohmann::json::parse(in);
  const nlohmann::json& runs = results.at("runs");
  ASSERT_EQ(runs.size(), 4u);  // ps and ring, each with its loopback baseline
  EXPECT_TRUE(results.at("failures").empty());
  int emulated = 0;
  for (const nlohmann::json& r : runs) {
    for (const char* key :
         {"mode", "workers", "shards", "model_params",
          "bytes_per_step_per_worker_measured",
          "bytes_per_step_per_worker_predicted", "step_seconds_measured",
          "step_seconds_predicted"}) {
      EXPECT_TRUE(r.contains(key)) << key;
    }
    EXPECT_EQ(r.at("steps_measured"), 6);
    EXPECT_TRUE(r.at("invalid").empty()) << r.at("invalid").dump();
    EXPECT_EQ(r.at("trained"), "64-32-10 on synthetic");
    // Throughput over the window: its samples over its span.
    EXPECT_EQ(r.at("window_samples"), 6 * 32);
    EXPECT_NEAR(r.at("samples_per_second").get<double>() *
                    r.at("window_seconds").get<double>(),
                6 * 32, 1e-6);
    EXPECT_GT(r.at("bytes_per_step_per_worker_measured").get<double>(), 0);
    EXPECT_LT(std::abs(r.at("bytes_error").get<double>()), 0.02)
        << r.at("name");
    if (r.at("link_bandwidth") != "0") {
      ++emulated;
      EXPECT_GT(r.at("overhead_seconds").get<double>(), 0)
          << "calibrated by the baseline";
    }
    if (r.at("mode") == "ps") {
      EXPECT_EQ(r.at("shard_bytes_per_step_measured").size(), 2u);
    }
  }
  EXPECT_EQ(emulated, 2);
  for (const char* file :
       {"results.csv", "results.md", "step_time.svg", "bytes_per_worker.svg",
        "shard_load.svg", "comm_compute.svg", "predicted_vs_measured.svg"}) {
    EXPECT_TRUE(fs::exists(dir / file))
        << file << " (plots need python3-matplotlib)";
  }
}

}  // namespace
}  // namespace ferry

#include "tests/fault/fault_fixture.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/child_process.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/process_run.h"

namespace ferry::testing {

std::vector<std::string> FaultJobArgs(const std::string& mode,
                                      const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"--mode",
                                   mode,
                                   "--workers",
                                   "3",
                                   "--epochs",
                                   std::to_string(kEpochs),
                                   "--device",
                                   "cpu",
                                   "--batch",
                                   "256",
                                   "--heartbeat-timeout",
                                   "3",
                                   "--checkpoint-every",
                                   "50"};
  if (mode == "ps") args.insert(args.end(), {"--shards", "2"});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

absl::StatusOr<LocalRun> RunLocal(const std::string& name,
                                  const std::vector<std::string>& args,
                                  absl::Duration timeout) {
  LocalRun run;
  run.log_dir =
      absl::StrCat(::testing::TempDir(), "/ferry-fault-", name, "-", getpid());
  std::filesystem::remove_all(run.log_dir);
  std::filesystem::create_directories(run.log_dir);
  const std::string summary = run.log_dir + "/summary.json";
  std::vector<std::string> argv = {std::string(FERRY_BIN_DIR) + "/ferry",
                                   "local"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(),
              {"--summary-json", summary, "--log-dir", run.log_dir + "/logs",
               "--timeout", std::to_string(absl::ToInt64Seconds(timeout))});
  const absl::Time start = absl::Now();
  auto child = ChildProcess::Spawn(argv, run.log_dir + "/ferry-local.log");
  if (!child.ok()) return child.status();
  // ferry local enforces --timeout itself; this is the backstop.
  run.exit_code = testing::AwaitExit(*child, timeout + absl::Seconds(30));
  run.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::ifstream in(summary);
  if (in)
    run.summary =
        nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return run;
}

// ctest runs each test in its own process: the reference summary is kept
// in the build tree (under a lock, so that parallel tests train it once) and
// reused while it is newer than the binaries.
const LocalRun& Reference(const std::string& mode) {
  static std::map<std::string, LocalRun>* cache =
      new std::map<std::string, LocalRun>();
  auto it = cache->find(mode);
  if (it != cache->end()) return it->second;
  const std::string dir = std::string(FERRY_BIN_DIR) + "/../fault-reference";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + mode + ".json";
  const int lock = open((path + ".lock").c_str(), O_CREAT | O_RDWR, 0644);
  if (lock >= 0) flock(lock, LOCK_EX);
  LocalRun reference;
  std::error_code ec;
  const auto binary = std::filesystem::last_write_time(
      std::string(FERRY_BIN_DIR) + "/ferry-worker", ec);
  const auto saved = std::filesystem::last_write_time(path, ec);
  if (!ec && saved > binary) {
    std::ifstream in(path);
    reference.summary = nlohmann::json::parse(in, nullptr, false);
    reference.exit_code = reference.summary.is_object() ? 0 : -1;
    reference.log_dir = path;
  }
  if (reference.exit_code != 0) {
    auto run = RunLocal(mode + "-reference", FaultJobArgs(mode));
    if (run.ok()) reference = *run;
    if (reference.exit_code == 0)
      std::ofstream(path) << reference.summary.dump();
  }
  if (lock >= 0) close(lock);
  return cache->emplace(mode, reference).first->second;
}

const LocalRun& Reference(const std::string& name,
                          const std::vector<std::string>& args,
                          absl::Duration timeout) {
  static std::map<std::string, LocalRun>* cache =
      new std::map<std::string, LocalRun>();
  auto it = cache->find(name);
  if (it != cache->end()) return it->second;
  const std::string dir = std::string(FERRY_BIN_DIR) + "/../fault-reference";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + name + ".json";
  const int lock = open((path + ".lock").c_str(), O_CREAT | O_RDWR, 0644);
  if (lock >= 0) flock(lock, LOCK_EX);
  const nlohmann::json key = args;
  LocalRun reference;
  std::error_code ec;
  auto saved = std::filesystem::last_write_time(path, ec);
  for (const char* binary : {"ferry", "ferry-server", "ferry-worker"}) {
    std::error_code missing;
    const auto built = std::filesystem::last_write_time(
        std::string(FERRY_BIN_DIR) + "/" + binary, missing);
    if (missing || built >= saved)
      ec = std::make_error_code(std::errc::io_error);
  }
  if (!ec) {
    std::ifstream in(path);
    const nlohmann::json saved_json = nlohmann::json::parse(in, nullptr, false);
    if (saved_json.is_object() &&
        saved_json.value("args", nlohmann::json()) == key &&
        saved_json.contains("summary")) {
      reference.summary = saved_json.at("summary");
      reference.exit_code = 0;
      reference.log_dir = path;
    }
  }
  if (reference.exit_code != 0) {
    auto run = RunLocal(name + "-reference", args, timeout);
    if (run.ok()) reference = *run;
    if (reference.exit_code == 0) {
      std::ofstream(path) << nlohmann::json{
          {"args", key},
          {"summary",
           reference.summary}}.dump();
    }
  }
  if (lock >= 0) close(lock);
  return cache->emplace(name, reference).first->second;
}

int CountEvents(const nlohmann::json& summary, const std::string& kind) {
  int n = 0;
  if (!summary.contains("events")) return 0;
  for (const auto& e : summary.at("events"))
    n += e.value("kind", "") == kind ? 1 : 0;
  return n;
}

void ExpectResumedFromOneCheckpoint(const nlohmann::json& summary) {
  std::vector<int64_t> versions;
  int failures_since_resume = 0;
  for (const auto& e : summary.value("events", nlohmann::json::array())) {
    const std::string kind = e.value("kind", "");
    if (kind == "step_aborted" || kind == "evicted" || kind == "left")
      ++failures_since_resume;
    if (kind != "ring_resumed") continue;
    // A resume after the first one follows an aborted step or a lost
    // member (whose step, if it was the only one in it, is un-formed).
    EXPECT_TRUE(versions.empty() || failures_since_resume > 0)
        << summary.dump(1);
    EXPECT_THAT(e.value("detail", ""),
                ::testing::HasSubstr("the ring checkpoint at"));
    versions.push_back(e.value("step", int64_t{-1}));
    failures_since_resume = 0;
  }
  ASSERT_FALSE(versions.empty()) << summary.dump(1);
  for (int64_t v : versions) EXPECT_EQ(v, versions.front());
  EXPECT_EQ(summary.at("rollbacks").get<int64_t>(), 1);
}

void ExpectHealthyUnderChurn(const std::string& name, const std::string& mode,
                             const std::vector<std::string>& job) {
  const LocalRun& reference = Reference(name, FaultJobArgs(mode, job));
  std::vector<std::string> chaos = job;
  chaos.insert(chaos.end(), {"--chaos", kChurn});
  auto run = RunLocal(name, FaultJobArgs(mode, chaos));
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectHealthyRun(*run, reference, mode, 4);
}

std::string BatchNormMlpFile() {
  const std::string path = absl::StrCat(
      ::testing::TempDir(), "/ferry-fault-bn-mlp-", getpid(), ".json");
  std::ofstream(path) << R"({"format": "ferry.model.v1",
    "input": {"shape": [784]}, "classes": 10, "layers": [
      {"type": "Linear", "args": {"in_features": 784, "out_features": 64}},
      {"type": "BatchNorm1d", "args": {"num_features": 64}},
      {"type": "ReLU"},
      {"type": "Linear", "args": {"in_features": 64, "out_features": 10}}]})";
  return path;
}

void ExpectHealthyRun(const LocalRun& run, const std::string& mode,
                      int min_workers_seen) {
  ExpectHealthyRun(run, Reference(mode), mode, min_workers_seen);
}

void ExpectHealthyRun(const LocalRun& run, const LocalRun& reference,
                      const std::string& mode, int min_workers_seen) {
  ASSERT_EQ(run.exit_code, 0) << "ferry local failed; logs in " << run.log_dir;
  ASSERT_TRUE(run.summary.is_object()) << "no summary in " << run.log_dir;
  const nlohmann::json& s = run.summary;
  const auto& accounting = s.at("epochs_accounting");
  ASSERT_EQ(accounting.size(), static_cast<size_t>(kEpochs)) << s.dump(1);
  for (const auto& epoch : accounting) {
    EXPECT_EQ(epoch.at("samples_applied").get<int64_t>(), kTrainSamples)
        << epoch.dump();
    EXPECT_EQ(epoch.at("samples_dropped").get<int64_t>(), 0) << epoch.dump();
  }
  EXPECT_GE(s.at("workers_seen").get<int>(), min_workers_seen);
  ASSERT_EQ(reference.exit_code, 0)
      << "reference run failed; logs in " << reference.log_dir;
  const double accuracy = s.at("test_accuracy").get<double>();
  const double expected = reference.summary.at("test_accuracy").get<double>();
  EXPECT_NEAR(accuracy, expected, 0.01) << "logs in " << run.log_dir;
  if (mode == "ring") {
    EXPECT_EQ(s.at("digest_mismatches").get<int64_t>(), 0);
    EXPECT_GT(s.at("digest_checks").get<int64_t>(), 0);
  }
}

}  // namespace ferry::testing

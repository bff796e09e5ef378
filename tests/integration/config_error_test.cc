// A configuration that cannot work is refused at once, with its message, and
// never restarted: by `ferry local` before anything starts, and by the
// servers themselves (exit kExitConfig) when they are started another way.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/child_process.h"
#include "common/exit_codes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/process_run.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class ConfigErrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(
        ::testing::TempDir(), "/config-error-",
        ::testing::UnitTest::GetInstance()->current_test_info()->name(), "-",
        getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  struct Result {
    int exit_code = -1;
    absl::Duration took;
    std::string output;
  };

  // Runs `argv` to its end (at most 60 s) with its output in a log.
  Result Run(const std::vector<std::string>& argv) {
    const std::string log = dir_ + "/out.log";
    const absl::Time start = absl::Now();
    auto child = ChildProcess::Spawn(argv, log);
    EXPECT_TRUE(child.ok()) << child.status();
    Result r;
    if (!child.ok()) return r;
    r.exit_code = testing::AwaitExit(*child, absl::Seconds(60));
    r.took = absl::Now() - start;
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    r.output = text.str();
    return r;
  }

  std::string dir_;
};

TEST_F(ConfigErrorTest, FerryLocalRefusesAModelSpecThatDoesNotParse) {
  const Result r =
      Run({std::string(FERRY_BIN_DIR) + "/ferry", "local", "--mode", "ring",
           "--workers", "1", "--dataset", "synthetic:600", "--model",
           "784-abc-10", "--log-dir", dir_ + "/logs"});
  EXPECT_EQ(r.exit_code, kExitConfig) << r.output;
  EXPECT_LT(r.took, absl::Seconds(5));
  EXPECT_THAT(r.output, HasSubstr("'abc' is not a positive layer size"));
  EXPECT_THAT(r.output, Not(HasSubstr("restart")));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/logs/coordinator.log"))
      << "nothing should have started";
}

TEST_F(ConfigErrorTest, FerryLocalRefusesAModelTheDatasetDoesNotFit) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed";
  }
  const Result r =
      Run({std::string(FERRY_BIN_DIR) + "/ferry", "local", "--mode", "ring",
           "--workers", "1", "--model", "100-10", "--log-dir", dir_ + "/logs"});
  EXPECT_EQ(r.exit_code, kExitConfig) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("784 features per sample but the model's input size "
                        "is 100"));
}

TEST_F(ConfigErrorTest, FerryLocalRefusesAModelFileThatDoesNotChain) {
  const std::string bad = dir_ + "/bad.json";
  std::ofstream(bad) << R"({"format": "ferry.model.v1",
    "input": {"shape": [1, 28, 28]}, "classes": 10, "layers": [
      {"type": "Conv2d", "args": {"in_channels": 1, "out_channels": 4,
                                  "kernel_size": 3}},
      {"type": "Flatten"},
      {"type": "Linear", "args": {"in_features": 9000, "out_features": 10}}]})";
  Result r = Run({std::string(FERRY_BIN_DIR) + "/ferry", "local", "--mode",
                  "ring", "--workers", "1", "--dataset", "synthetic:600",
                  "--model", bad, "--log-dir", dir_ + "/logs"});
  EXPECT_EQ(r.exit_code, kExitConfig) << r.output;
  EXPECT_THAT(r.output, HasSubstr("layer 2 (Linear): in_features is 9000 but "
                                  "its input has 2704 features"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/logs/coordinator.log"));
}

// BatchNorm's running statistics need sync steps and >= 2 samples per
// worker: refused before any process starts, naming the layer.
TEST_F(ConfigErrorTest, FerryLocalRefusesBatchNormWhereItCannotTrain) {
  const std::string norm = dir_ + "/norm.json";
  std::ofstream(norm) << R"({"format": "ferry.model.v1",
    "input": {"shape": [784]}, "classes": 10, "layers": [
      {"type": "Linear", "args": {"in_features": 784, "out_features": 16}},
      {"type": "BatchNorm1d", "args": {"num_features": 16}},
      {"type": "Linear", "args": {"in_features": 16, "out_features": 10}}]})";
  const std::string local = std::string(FERRY_BIN_DIR) + "/ferry";
  Result r = Run({local, "local", "--mode", "ps", "--consistency", "async",
                  "--workers", "2", "--dataset", "synthetic:600", "--model",
                  norm, "--log-dir", dir_ + "/logs"});
  EXPECT_EQ(r.exit_code, kExitConfig) << r.output;
  EXPECT_THAT(r.output, HasSubstr("layer 1 (BatchNorm1d): BatchNorm's running "
                                  "statistics need sync steps"));
  r = Run({local, "local", "--mode", "ring", "--workers", "3", "--batch", "5",
           "--dataset", "synthetic:600", "--model", norm, "--log-dir",
           dir_ + "/logs"});
  EXPECT_EQ(r.exit_code, kExitConfig) << r.output;
  EXPECT_THAT(r.output, HasSubstr("at least 2 samples per worker; --batch 5 "
                                  "over 3 workers"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/logs/coordinator.log"));
  // Pipelines normalize each micro-batch with its own statistics.
  r = Run({local, "local", "--mode", "ring", "--workers", "2", "--batch", "8",
           "--pipeline-stages", "2", "--micro-batches", "8", "--dataset",
           "synthetic:600", "--model", norm, "--log-dir", dir_ + "/logs"});
  EXPECT_EQ(r.exit_code, kExitConfig) << r.output;
  EXPECT_THAT(r.output, HasSubstr("BatchNorm needs at least 2 samples per "
                                  "micro-batch; --batch 8 over 2 workers as 1 "
                                  "replicas in 8 micro-batches"));
}

TEST_F(ConfigErrorTest, CoordinatorExitsWithTheConfigCode) {
  const Result r =
      Run({std::string(FERRY_BIN_DIR) + "/ferry-server", "--role",
           "coordinator", "--mode", "ring", "--listen", "127.0.0.1:0",
           "--dataset", "synthetic:600", "--model", "784-abc-10"});
  EXPECT_EQ(r.exit_code, kExitConfig) << r.output;
  EXPECT_THAT(r.output, HasSubstr("'abc' is not a positive layer size"));
}

// Pipeline jobs the coordinator cannot run (docs/pipeline.md): refused at
// start with the reason.
TEST_F(ConfigErrorTest, CoordinatorRefusesPipelinesItCannotRun) {
  const std::string server = std::string(FERRY_BIN_DIR) + "/ferry-server";
  const std::vector<std::string> base = {
      server,        "--role",    "coordinator",  "--listen",
      "127.0.0.1:0", "--dataset", "synthetic:600"};
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--mode", "ps", "--shards", "127.0.0.1:1", "--consistency",
             "async", "--pipeline-stages", "2"},
            "needs --consistency sync"},
           {{"--mode", "ps", "--shards", "127.0.0.1:1", "--sync-quorum", "1",
             "--pipeline-stages", "2"},
            "cannot take --sync-quorum"},
           {{"--mode", "ring", "--pipeline-stages", "4"}, "into 4 stages"},
           {{"--mode", "ring", "--micro-batches", "4"},
            "need --pipeline-stages > 1"},
           {{"--mode", "ring", "--pipeline-stages", "2", "--pipeline-split",
             "1"},
            "which has no parameters"},
           {{"--mode", "ring", "--pipeline-stages", "2", "--micro-batches",
             "500"},
            "must be <= --batch"}}) {
    std::vector<std::string> argv = base;
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const Result r = Run(argv);
    EXPECT_EQ(r.exit_code, kExitConfig) << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.message));
  }
}

// --worker-memory-budget on `ferry local`: a model over it on one worker is
// refused by the coordinator, naming what it needs; a PS pipeline under a
// budget needs a whole replica.
TEST_F(ConfigErrorTest, LocalRefusesAModelOverTheWorkerMemoryBudget) {
  const std::string local = std::string(FERRY_BIN_DIR) + "/ferry";
  const std::vector<std::string> base = {local,
                                         "local",
                                         "--mode",
                                         "ps",
                                         "--shards",
                                         "1",
                                         "--model",
                                         "784-2048-2048-10",
                                         "--dataset",
                                         "synthetic:600",
                                         "--batch",
                                         "64",
                                         "--worker-memory-budget",
                                         "40MiB",
                                         "--log-dir",
                                         dir_ + "/logs"};
  std::vector<std::string> argv = base;
  argv.insert(argv.end(), {"--workers", "2"});
  Result r = Run(argv);
  EXPECT_EQ(r.exit_code, kExitConfig) << r.output;
  EXPECT_THAT(r.output, HasSubstr("over the worker memory budget of 40.0 MiB"));
  EXPECT_THAT(r.output, HasSubstr("--pipeline-stages"));
  argv = base;
  argv.insert(argv.end(), {"--workers", "1", "--pipeline-stages", "2"});
  r = Run(argv);
  EXPECT_EQ(r.exit_code, kExitConfig) << r.output;
  EXPECT_THAT(r.output, HasSubstr("1 expected workers are fewer than "
                                  "--pipeline-stages (2)"));
}

// A DLRM job that cannot run, and --embedding-* flags without a DLRM:
// refused by `ferry local` before anything starts, and by the coordinator
// itself, with the same words.
TEST_F(ConfigErrorTest, DlrmJobsThatCannotRunAreRefused) {
  const std::string local = std::string(FERRY_BIN_DIR) + "/ferry";
  const std::string data = "criteo:" + dir_ + "/no-data";
  // Ring mode keeps every row on every member: no TTL.
  Result r = Run({local, "local", "--mode", "ring", "--workers", "1", "--model",
                  "dlrm", "--dataset", data, "--embedding-ttl-steps", "100",
                  "--log-dir", dir_ + "/logs"});
  EXPECT_EQ(r.exit_code, kExitConfig) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--embedding-ttl-steps: ring mode keeps "
                                  "every row on every member"));
  r = Run({local, "local", "--model", "dlrm", "--dataset", "synthetic:600",
           "--log-dir", dir_ + "/logs"});
  EXPECT_EQ(r.exit_code, kExitConfig) << r.output;
  EXPECT_THAT(r.output, HasSubstr("trains on --dataset criteo:DIR"));
  r = Run({local, "local", "--model", "784-16-10", "--dataset", "synthetic:600",
           "--embedding-lr", "0.1", "--log-dir", dir_ + "/logs"});
  EXPECT_EQ(r.exit_code, kExitConfig) << r.output;
  EXPECT_THAT(r.output, HasSubstr("784-16-10 is a dense model"));
  r = Run({local, "local", "--model", "dlrm", "--dataset", data, "--mode",
           "ring", "--ring-full-table-rows", "1000", "--export", dir_ + "/out",
           "--log-dir", dir_ + "/logs"});
  EXPECT_EQ(r.exit_code, kExitConfig) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--export with --ring-full-table-rows"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/logs/coordinator.log"))
      << "nothing should have started";

  const std::string server = std::string(FERRY_BIN_DIR) + "/ferry-server";
  r = Run({server, "--role", "coordinator", "--mode", "ring", "--listen",
           "127.0.0.1:0", "--model", "dlrm", "--dataset", data,
           "--embedding-ttl-steps", "100"});
  EXPECT_EQ(r.exit_code, kExitConfig) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--embedding-ttl-steps: ring mode"));
  r = Run({server, "--role", "coordinator", "--listen", "127.0.0.1:0",
           "--shards", "127.0.0.1:1", "--model", "dlrm", "--dataset",
           "fashion-mnist"});
  EXPECT_EQ(r.exit_code, kExitConfig) << r.output;
  EXPECT_THAT(r.output, HasSubstr("trains on --dataset criteo:DIR"));
  r = Run({server, "--role", "coordinator", "--listen", "127.0.0.1:0",
           "--shards", "127.0.0.1:1", "--model", "784-16-10", "--dataset",
           "synthetic:600", "--embedding-admit-count", "2"});
  EXPECT_EQ(r.exit_code, kExitConfig) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--embedding-* flags"));
  // A missing data directory: the coordinator's configuration error too.
  r = Run({server, "--role", "coordinator", "--listen", "127.0.0.1:0",
           "--shards", "127.0.0.1:1", "--model", "dlrm", "--dataset", data});
  EXPECT_EQ(r.exit_code, kExitConfig) << r.output;
  EXPECT_THAT(r.output, HasSubstr("no-data"));
}

TEST_F(ConfigErrorTest, BadUsageIsAConfigErrorAndHelpIsNot) {
  EXPECT_EQ(Run({std::string(FERRY_BIN_DIR) + "/ferry-server", "--role",
                 "coordinator", "--no-such-flag"})
                .exit_code,
            kExitConfig);
  EXPECT_EQ(
      Run({std::string(FERRY_BIN_DIR) + "/ferry-server", "--help"}).exit_code,
      0);
  EXPECT_EQ(
      Run({std::string(FERRY_BIN_DIR) + "/ferry-worker", "--bogus"}).exit_code,
      kExitConfig);
}

}  // namespace
}  // namespace ferry

// `ferry local`'s command line: what reaches the coordinator, and what is
// refused before any process starts.
#include "client/local_command.h"

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "common/cli_main.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

// The value after `flag` in `args` ("" when absent).
std::string ValueOf(const std::vector<std::string>& args,
                    const std::string& flag) {
  auto it = std::find(args.begin(), args.end(), flag);
  return it == args.end() || it + 1 == args.end() ? "" : *(it + 1);
}

struct Parsed {
  CLI::App app{"ferry"};
  CLI::App* local = app.add_subcommand("local");
  LocalCommandLine line;
  Parsed() { AddLocalFlags(*local, line); }
};

TEST(LocalCommandTest, TheJobFlagsReachTheCoordinatorExactly) {
  Parsed p;
  ASSERT_EQ(std::nullopt,
            ParseCommandLine(
                p.app, {"ferry", "local", "--lr", "1e-7", "--batch", "64",
                        "--dataset", "synthetic:256", "--init-from", "rel/dir",
                        "--model", "784-32-10", "--heartbeat-timeout", "2.5",
                        "--checkpoint-wait-limit", "12.5"}));
  auto options = ResolveLocalCommand(p.line);
  ASSERT_TRUE(options.ok()) << options.status();
  const std::vector<std::string>& args = options->job_args;
  EXPECT_EQ(std::stod(ValueOf(args, "--lr")), 1e-7);  // not rounded to 0
  EXPECT_EQ(ValueOf(args, "--batch"), "64");
  EXPECT_EQ(ValueOf(args, "--model"), "784-32-10");
  EXPECT_TRUE(
      std::filesystem::path(ValueOf(args, "--init-from")).is_absolute());
  // Given only when on the command line: the coordinator's default holds.
  EXPECT_EQ(ValueOf(args, "--checkpoint-every"), "");
  EXPECT_EQ(ValueOf(args, "--heartbeat-timeout"), "2.5");
  EXPECT_EQ(ValueOf(args, "--checkpoint-wait-limit"), "12.5");
  EXPECT_EQ(options->global_batch, 64);
}

TEST(LocalCommandTest, RefusesWhatTheJobCannotRunAsConfigurationErrors) {
  for (const std::vector<std::string>& bad :
       std::vector<std::vector<std::string>>{
           {"--optimizer", "rmsprop"},
           {"--chaos", "kill:worker0"},
           {"--link-bandwidth", "fast"},
           {"--model", "784-10-3"},  // 3 outputs for 10 classes
           {"--mode", "ring", "--model", "dlrm"},
           {"--mode", "ring", "--colocated-shards"},
           {"--mode", "hybrid", "--model", "dlrm", "--colocated-shards"},
           {"--workers", "2", "--shards", "3", "--colocated-shards"},
       }) {
    Parsed p;
    std::vector<std::string> args = {"ferry", "local"};
    args.insert(args.end(), bad.begin(), bad.end());
    ASSERT_EQ(std::nullopt, ParseCommandLine(p.app, args)) << bad[0];
    auto options = ResolveLocalCommand(p.line);
    EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument)
        << bad[0] << " " << options.status();
  }
}

TEST(LocalCommandTest, ColocatedShardsNeedAWorkerForEveryShardProcess) {
  Parsed p;
  ASSERT_EQ(std::nullopt,
            ParseCommandLine(p.app, {"ferry", "local", "--workers", "3",
                                     "--shards", "2", "--colocated-shards"}));
  auto options = ResolveLocalCommand(p.line);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->colocated_shards);
}

TEST(LocalCommandTest, ColocatedShardsRunInPyTorchWorkersToo) {
  Parsed p;
  ASSERT_EQ(
      std::nullopt,
      ParseCommandLine(
          p.app, {"ferry", "local", "--workers", "2", "--shards", "2",
                  "--colocated-shards", "--model", "external", "--dataset",
                  "external:64", "--worker-command", "python3 train.py"}));
  auto options = ResolveLocalCommand(p.line);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->colocated_shards);
  EXPECT_EQ(options->worker_command, "python3 train.py");
}

}  // namespace
}  // namespace ferry

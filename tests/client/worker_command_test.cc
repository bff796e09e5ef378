// HostedWorkerArgv: the environment and shell line of a --worker-command
// worker.
#include "client/worker_command.h"

#include <string>
#include <vector>

#include "common/allocator_tuning.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

TEST(WorkerCommandTest, RunsTheCommandWithTheJobInItsEnvironment) {
  EXPECT_EQ(
      HostedWorkerArgv("python3 train.py --lr 0.1", "127.0.0.1:7070",
                       "/src/build/bin", nullptr, "glibc.malloc.arena_max=4"),
      (std::vector<std::string>{
          "/usr/bin/env", "FERRY_COORDINATOR=127.0.0.1:7070",
          "PYTHONPATH=/src/build/python", "FERRY_PEER_LISTEN=127.0.0.1:0",
          "/bin/sh", "-c", "exec python3 train.py --lr 0.1"}));
}

TEST(WorkerCommandTest, AddsTheGivenVariablesBeforeTheShell) {
  const std::vector<std::string> argv =
      HostedWorkerArgv("x", "h:1", "/b/bin", nullptr, "own",
                       {"FERRY_HOST_SHARD=1", "FERRY_SHARD_LISTEN=h:2"});
  ASSERT_EQ(argv.size(), 9u);
  EXPECT_EQ(argv[4], "FERRY_HOST_SHARD=1");
  EXPECT_EQ(argv[5], "FERRY_SHARD_LISTEN=h:2");
  EXPECT_EQ(argv[6], "/bin/sh");
}

TEST(WorkerCommandTest, KeepsTheLaunchersPythonPathAfterFerrys) {
  const std::vector<std::string> argv =
      HostedWorkerArgv("x", "h:1", "/b/bin", "/opt/lib:/more", "own");
  EXPECT_EQ(argv[2], "PYTHONPATH=/b/python:/opt/lib:/more");
  EXPECT_EQ(HostedWorkerArgv("x", "h:1", "/b/bin", "", "own")[2],
            "PYTHONPATH=/b/python");
}

TEST(WorkerCommandTest, OneMallocArenaUnlessTheUserTunedIt) {
  for (const char* launcher :
       {static_cast<const char*>(nullptr), "",
        static_cast<const char*>(kFerryMallocTunables)}) {
    const std::vector<std::string> tuned =
        HostedWorkerArgv("x", "h:1", "/b/bin", nullptr, launcher);
    ASSERT_GE(tuned.size(), 3u);
    EXPECT_EQ(tuned[1],
              std::string("GLIBC_TUNABLES=") + kTorchWorkerMallocTunables);
    EXPECT_EQ(tuned[2], "FERRY_COORDINATOR=h:1");
    EXPECT_EQ(tuned.back(), "exec x");
  }
  // A user's own setting stays.
  const std::vector<std::string> own = HostedWorkerArgv(
      "x", "h:1", "/b/bin", nullptr, "glibc.malloc.arena_max=2");
  EXPECT_EQ(own[1], "FERRY_COORDINATOR=h:1");
}

}  // namespace
}  // namespace ferry

// HostedWorkerArgv: the environment and shell line of a --worker-command
// worker.
#include "client/worker_command.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

TEST(WorkerCommandTest, RunsTheCommandWithTheJobInItsEnvironment) {
  EXPECT_EQ(HostedWorkerArgv("python3 train.py --lr 0.1", "127.0.0.1:7070",
                             "/src/build/bin", nullptr),
            (std::vector<std::string>{
                "/usr/bin/env", "FERRY_COORDINATOR=127.0.0.1:7070",
                "PYTHONPATH=/src/build/python", "FERRY_PEER_LISTEN=127.0.0.1:0",
                "/bin/sh", "-c", "exec python3 train.py --lr 0.1"}));
}

TEST(WorkerCommandTest, KeepsTheLaunchersPythonPathAfterFerrys) {
  const std::vector<std::string> argv =
      HostedWorkerArgv("x", "h:1", "/b/bin", "/opt/lib:/more");
  EXPECT_EQ(argv[2], "PYTHONPATH=/b/python:/opt/lib:/more");
  EXPECT_EQ(HostedWorkerArgv("x", "h:1", "/b/bin", "")[2],
            "PYTHONPATH=/b/python");
}

}  // namespace
}  // namespace ferry

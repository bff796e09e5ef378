// grpc.health.v1 in ferry: the HealthState mirrored into real servers, and
// the real ferry-server binaries' readiness over their plaintext health port
// while starting, serving, losing their coordinator and draining.
#include "proto/health.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/child_process.h"
#include "common/ops_flags.h"
#include "gtest/gtest.h"
#include "proto/rpc_util.h"
#include "tests/testing/process_run.h"
#include "tests/testing/wait_until.h"

namespace ferry {
namespace {

HealthStatus Check(int port, const std::string& service) {
  return CheckHealth(MakeChannel(absl::StrCat("127.0.0.1:", port)), service,
                     absl::Seconds(2));
}

TEST(HealthState, ReadinessFollowsStartPeersAndDrainWhileLivenessOnlyDrains) {
  HealthState state;
  auto server = HealthServer::Start(0, &state, "127.0.0.1");
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  EXPECT_EQ(Check(port, ""), HealthStatus::kNotServing);  // starting
  EXPECT_EQ(Check(port, kLivenessService), HealthStatus::kServing);
  EXPECT_EQ(Check(port, "no.such.Service"), HealthStatus::kServiceUnknown);
  EXPECT_EQ(state.reason(), "starting");

  state.SetStarted();
  EXPECT_EQ(Check(port, ""), HealthStatus::kServing);
  EXPECT_TRUE(state.ready());

  state.SetPeersReachable(false, "coordinator unreachable");
  EXPECT_EQ(Check(port, ""), HealthStatus::kNotServing);
  EXPECT_EQ(Check(port, kLivenessService), HealthStatus::kServing);
  EXPECT_EQ(state.reason(), "coordinator unreachable");
  state.SetPeersReachable(true);
  EXPECT_EQ(Check(port, ""), HealthStatus::kServing);

  state.SetDraining();
  EXPECT_EQ(Check(port, ""), HealthStatus::kNotServing);
  EXPECT_EQ(Check(port, kLivenessService), HealthStatus::kNotServing);
  EXPECT_FALSE(state.live());
}

TEST(HealthState, ABusyPortIsUnavailable) {
  HealthState state;
  auto first = HealthServer::Start(0, &state, "127.0.0.1");
  ASSERT_TRUE(first.ok());
  auto second = HealthServer::Start((*first)->port(), &state, "127.0.0.1");
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
}

TEST(CheckHealth, NobodyListeningIsUnreachableWithinTheDeadline) {
  // A port nobody binds: claimed by this process, never listened on.
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok());
  const absl::Time start = absl::Now();
  std::string error;
  EXPECT_EQ(CheckHealth(MakeChannel(absl::StrCat("127.0.0.1:", *port)), "",
                        absl::Milliseconds(500), &error),
            HealthStatus::kUnreachable);
  EXPECT_FALSE(error.empty());
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

// GET http://127.0.0.1:port/metrics with a plain socket; "" on failure.
std::string HttpGetMetrics(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  const std::string request =
      "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
  (void)!write(fd, request.data(), request.size());
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  close(fd);
  return out;
}

bool WaitFor(HealthStatus want, int port, const std::string& service,
             absl::Duration timeout) {
  return testutil::WaitUntil(
             absl::StrCat("health of '", service, "' on port ", port, " = ",
                          static_cast<int>(want)),
             [&] { return Check(port, service) == want; }, timeout)
      .ok();
}

class ServerHealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/health-", getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(ServerHealthTest, ShardIsReadyOnlyWhileItsCoordinatorAnswers) {
  // Both service ports are picked before either process starts: the
  // shard dials the coordinator, whose --shards names the shard. The
  // health and metrics ports are bound free and read back.
  auto coord_port = PickFreePort();
  auto ps_port = PickFreePort();
  ASSERT_TRUE(coord_port.ok() && ps_port.ok());
  const std::string bin = FERRY_BIN_DIR;
  const std::string coord = absl::StrCat("127.0.0.1:", *coord_port);
  const std::string shard = absl::StrCat("127.0.0.1:", *ps_port);
  const std::string any = std::to_string(kAnyPort);

  // The shard starts first: it keeps trying to fetch the job, alive but
  // not ready.
  auto ps = ChildProcess::Spawn(
      {bin + "/ferry-server", "--role", "ps", "--listen", shard,
       "--coordinator", coord, "--shard-id", "0", "--health-port", any,
       "--ops-port-file", dir_ + "/ps.ops", "--log-format", "json"},
      dir_ + "/ps.log");
  ASSERT_TRUE(ps.ok()) << ps.status();
  const absl::StatusOr<OpsPorts> ps_ops =
      testing::AwaitOpsPorts(*ps, dir_ + "/ps.ops");
  ASSERT_TRUE(ps_ops.ok()) << ps_ops.status();
  const int ps_health = ps_ops->health;
  ASSERT_TRUE(WaitFor(HealthStatus::kServing, ps_health, kLivenessService,
                      absl::Seconds(10)));
  EXPECT_EQ(Check(ps_health, ""), HealthStatus::kNotServing);

  auto coordinator = ChildProcess::Spawn({bin + "/ferry-server",
                                          "--role",
                                          "coordinator",
                                          "--listen",
                                          coord,
                                          "--shards",
                                          shard,
                                          "--model",
                                          "16-8-4",
                                          "--dataset",
                                          "synthetic:64",
                                          "--batch",
                                          "16",
                                          "--epochs",
                                          "1",
                                          "--health-port",
                                          any,
                                          "--metrics-port",
                                          any,
                                          "--ops-port-file",
                                          dir_ + "/coordinator.ops"},
                                         dir_ + "/coordinator.log");
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  const absl::StatusOr<OpsPorts> coord_ops_or =
      testing::AwaitOpsPorts(*coordinator, dir_ + "/coordinator.ops");
  ASSERT_TRUE(coord_ops_or.ok()) << coord_ops_or.status();
  const OpsPorts coord_ops = *coord_ops_or;
  ASSERT_NE(coord_ops.health, 0);
  ASSERT_NE(coord_ops.metrics, 0);
  EXPECT_TRUE(
      WaitFor(HealthStatus::kServing, coord_ops.health, "", absl::Seconds(20)));
  // The service port answers too, for the service it hosts.
  EXPECT_EQ(Check(*coord_port, "ferry.v1.Coordinator"), HealthStatus::kServing);
  EXPECT_TRUE(
      WaitFor(HealthStatus::kServing, ps_health, "", absl::Seconds(20)));
  EXPECT_EQ(Check(*ps_port, "ferry.v1.ParameterServer"),
            HealthStatus::kServing);
  const std::string metrics = HttpGetMetrics(coord_ops.metrics);
  EXPECT_NE(metrics.find("200 OK"), std::string::npos)
      << metrics.substr(0, 200);
  EXPECT_NE(metrics.find("ferry_"), std::string::npos);

  // The coordinator goes away: the shard is no longer ready, but alive.
  EXPECT_EQ(coordinator->Stop(absl::Seconds(10)), 0);
  EXPECT_TRUE(
      WaitFor(HealthStatus::kNotServing, ps_health, "", absl::Seconds(15)));
  EXPECT_EQ(Check(ps_health, kLivenessService), HealthStatus::kServing);

  EXPECT_EQ(ps->Stop(absl::Seconds(10)), 0);
  // Structured logs: every line of the shard is a JSON object.
  std::ifstream log(dir_ + "/ps.log");
  std::string line;
  int lines = 0;
  while (std::getline(log, line)) {
    if (line.empty()) continue;
    ++lines;
    EXPECT_EQ(line.front(), '{') << line;
  }
  EXPECT_GT(lines, 2);
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST_F(ServerHealthTest,
       WorkerStaysAliveAfterTheJobWhenAskedAndLeavesOnSigterm) {
  const std::string bin = FERRY_BIN_DIR;
  auto coordinator = ChildProcess::Spawn(
      {bin + "/ferry-server", "--role", "coordinator", "--mode", "ring",
       "--listen", "127.0.0.1:0", "--port-file", dir_ + "/coordinator.port",
       "--model", "16-8-4", "--dataset", "synthetic:64", "--batch", "16",
       "--epochs", "1", "--max-steps", "3"},
      dir_ + "/coordinator.log");
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  const absl::StatusOr<int> coord_port =
      testing::AwaitPort(*coordinator, dir_ + "/coordinator.port");
  ASSERT_TRUE(coord_port.ok()) << coord_port.status();
  auto worker = ChildProcess::Spawn(
      {bin + "/ferry-worker", "--coordinator",
       absl::StrCat("127.0.0.1:", *coord_port), "--peer-listen", "127.0.0.1:0",
       "--after-finish", "wait", "--health-port", std::to_string(kAnyPort),
       "--ops-port-file", dir_ + "/worker.ops"},
      dir_ + "/worker.log");
  ASSERT_TRUE(worker.ok()) << worker.status();
  const absl::StatusOr<OpsPorts> worker_ops =
      testing::AwaitOpsPorts(*worker, dir_ + "/worker.ops");
  ASSERT_TRUE(worker_ops.ok()) << worker_ops.status();
  const int worker_health = worker_ops->health;
  const absl::Status idle = testutil::WaitUntil(
      "the worker to log \"idle until SIGTERM\" (or exit)",
      [&] {
        return Slurp(dir_ + "/worker.log").find("idle until SIGTERM") !=
                   std::string::npos ||
               worker->Poll().has_value();
      },
      absl::Seconds(60));
  ASSERT_TRUE(idle.ok()) << idle;
  ASSERT_NE(Slurp(dir_ + "/worker.log").find("idle until SIGTERM"),
            std::string::npos)
      << Slurp(dir_ + "/worker.log");
  // Past the point where it would have exited: it answers liveness and is
  // still running.
  EXPECT_EQ(Check(worker_health, kLivenessService), HealthStatus::kServing);
  EXPECT_FALSE(worker->Poll().has_value());  // did not exit
  const absl::Time stop = absl::Now();
  EXPECT_EQ(worker->Stop(absl::Seconds(10)), 0);
  EXPECT_LT(absl::Now() - stop, absl::Seconds(5));
  EXPECT_EQ(coordinator->Stop(absl::Seconds(10)), 0);
}

}  // namespace
}  // namespace ferry

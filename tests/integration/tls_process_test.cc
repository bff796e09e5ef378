// TLS, mutual TLS and the bearer token in the real binaries: a coordinator
// started with the security flags keeps its --health-port in plaintext for
// probes while its service port refuses plaintext and untokened calls, and
// whole `ferry local` jobs (PS and ring) train with every channel under
// mutual TLS and the token. Certificates come from openssl at test time.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/child_process.h"
#include "ferry/v1/coordinator.grpc.pb.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/health.h"
#include "proto/rpc_security.h"
#include "proto/rpc_util.h"
#include "tests/integration/tls_certs_fixture.h"
#include "tests/testing/process_run.h"
#include "tests/testing/wait_until.h"

namespace ferry {
namespace {

class TlsProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::HaveOpenssl()) GTEST_SKIP() << "openssl is not on PATH";
    ASSERT_TRUE(testing::GetCerts().ok)
        << "openssl failed, see " << testing::GetCerts().dir;
    dir_ = absl::StrCat(
        ::testing::TempDir(), "/tls-process-", getpid(), "-",
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    token_file_ = testing::WriteFile(dir_, "token", "tok-123\n");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The flags every process of the job gets: mutual TLS plus the token.
  std::vector<std::string> SecurityArgs() const {
    const testing::Certs& c = testing::GetCerts();
    return {"--tls-cert",
            c.Path("server.pem"),
            "--tls-key",
            c.Path("server.key"),
            "--tls-ca",
            c.Path("ca.pem"),
            "--require-client-cert",
            "--auth-token-file",
            token_file_};
  }
  RpcSecurityConfig Client(bool with_token) const {
    const testing::Certs& c = testing::GetCerts();
    OpsFlags flags;
    flags.tls_cert = c.Path("client.pem");
    flags.tls_key = c.Path("client.key");
    flags.tls_ca = c.Path("ca.pem");
    if (with_token) flags.auth_token_file = token_file_;
    auto config = LoadRpcSecurity(flags);
    EXPECT_TRUE(config.ok()) << config.status();
    return config.ok() ? *config : RpcSecurityConfig();
  }

  std::string dir_;
  std::string token_file_;
};

grpc::Status GetJob(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = v1::Coordinator::NewStub(channel);
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(5));
  v1::JobSpec job;
  return stub->GetJob(&context, v1::GetJobRequest(), &job);
}

TEST_F(TlsProcessTest,
       HealthPortStaysPlaintextWhileTheServicePortNeedsTlsAndToken) {
  std::vector<std::string> argv = {std::string(FERRY_BIN_DIR) + "/ferry-server",
                                   "--role",
                                   "coordinator",
                                   "--mode",
                                   "ring",
                                   "--listen",
                                   "127.0.0.1:0",
                                   "--port-file",
                                   dir_ + "/coordinator.port",
                                   "--model",
                                   "16-8-4",
                                   "--dataset",
                                   "synthetic:64",
                                   "--health-port",
                                   std::to_string(kAnyPort),
                                   "--ops-port-file",
                                   dir_ + "/coordinator.ops"};
  for (const std::string& a : SecurityArgs()) argv.push_back(a);
  auto coordinator = ChildProcess::Spawn(argv, dir_ + "/coordinator.log");
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  const absl::StatusOr<OpsPorts> ops =
      testing::AwaitOpsPorts(*coordinator, dir_ + "/coordinator.ops");
  ASSERT_TRUE(ops.ok()) << ops.status();
  const absl::StatusOr<int> port =
      testing::AwaitPort(*coordinator, dir_ + "/coordinator.port");
  ASSERT_TRUE(port.ok()) << port.status();

  // Plaintext probe on the health port, as the kubelet does.
  auto plaintext_health =
      MakeChannel(absl::StrCat("127.0.0.1:", ops->health), RpcSecurityConfig());
  const absl::Status serving =
      testutil::WaitUntil("the plaintext health port to answer SERVING", [&] {
        return CheckHealth(plaintext_health, "", absl::Seconds(1)) ==
               HealthStatus::kServing;
      });
  ASSERT_TRUE(serving.ok()) << serving;

  const std::string service = absl::StrCat("localhost:", *port);
  // The service port: no plaintext, not even for health.
  EXPECT_EQ(CheckHealth(MakeChannel(service, RpcSecurityConfig()), "",
                        absl::Seconds(2)),
            HealthStatus::kUnreachable);
  EXPECT_EQ(GetJob(MakeChannel(service, RpcSecurityConfig())).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // Over mutual TLS: health needs no token, the job does.
  EXPECT_EQ(
      CheckHealth(MakeChannel(service, Client(false)), "", absl::Seconds(2)),
      HealthStatus::kServing);
  EXPECT_EQ(GetJob(MakeChannel(service, Client(false))).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(GetJob(MakeChannel(service, Client(true))).ok());
  EXPECT_EQ(coordinator->Stop(absl::Seconds(10)), 0);
}

TEST_F(TlsProcessTest, ACaWithoutACertificateIsRefusedAtStart) {
  auto server = ChildProcess::Spawn(
      {std::string(FERRY_BIN_DIR) + "/ferry-server", "--role", "coordinator",
       "--mode", "ring", "--listen", "127.0.0.1:0", "--tls-ca",
       testing::GetCerts().Path("ca.pem")},
      dir_ + "/server.log");
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(testing::AwaitExit(*server, absl::Seconds(20)), 2);
  std::ifstream log(dir_ + "/server.log");
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_NE(text.str().find("--tls-ca needs --tls-cert and --tls-key"),
            std::string::npos)
      << text.str();
}

// Ring peers are dialled by pod IP, which no certificate made in advance
// lists: --tls-server-name makes a client check another name. Here the
// server's certificate names localhost and 127.0.0.1, and it is dialled at
// 127.0.0.2 (loopback too).
TEST_F(TlsProcessTest,
       ServerNameOverrideVerifiesPeersDialledByAnUnlistedAddress) {
  std::vector<std::string> argv = {std::string(FERRY_BIN_DIR) + "/ferry-server",
                                   "--role",
                                   "coordinator",
                                   "--mode",
                                   "ring",
                                   "--listen",
                                   "0.0.0.0:0",
                                   "--port-file",
                                   dir_ + "/coordinator.port",
                                   "--model",
                                   "16-8-4",
                                   "--dataset",
                                   "synthetic:64"};
  for (const std::string& a : SecurityArgs()) argv.push_back(a);
  auto coordinator = ChildProcess::Spawn(argv, dir_ + "/coordinator.log");
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  const absl::StatusOr<int> port =
      testing::AwaitPort(*coordinator, dir_ + "/coordinator.port");
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string unlisted = absl::StrCat("127.0.0.2:", *port);
  RpcSecurityConfig by_name = Client(true);
  by_name.server_name = "localhost";
  // It listens (the port file is written after the bind): the first call
  // already answers.
  const grpc::Status status = GetJob(MakeChannel(unlisted, by_name));
  EXPECT_TRUE(status.ok()) << status.error_message();
  // Without the override the address itself is checked, and is not listed.
  EXPECT_EQ(GetJob(MakeChannel(unlisted, Client(true))).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(coordinator->Stop(absl::Seconds(10)), 0);
}

class TlsJobTest : public TlsProcessTest,
                   public ::testing::WithParamInterface<std::string> {};

TEST_P(TlsJobTest, LocalJobTrainsWithMutualTlsAndTokenOnEveryChannel) {
  std::vector<std::string> argv = {std::string(FERRY_BIN_DIR) + "/ferry",
                                   "local",
                                   "--mode",
                                   GetParam(),
                                   "--workers",
                                   "2",
                                   "--shards",
                                   "2",
                                   "--model",
                                   "32-16-4",
                                   "--dataset",
                                   "synthetic:512",
                                   "--batch",
                                   "32",
                                   "--epochs",
                                   "1",
                                   "--max-steps",
                                   "12",
                                   "--timeout",
                                   "120",
                                   "--log-dir",
                                   dir_ + "/logs",
                                   "--summary-json",
                                   dir_ + "/summary.json"};
  for (const std::string& a : SecurityArgs()) argv.push_back(a);
  auto job = ChildProcess::Spawn(argv, dir_ + "/ferry-local.log");
  ASSERT_TRUE(job.ok()) << job.status();
  const int rc = testing::AwaitExit(*job, absl::Seconds(150));
  std::ifstream log(dir_ + "/ferry-local.log");
  std::stringstream text;
  text << log.rdbuf();
  ASSERT_EQ(rc, 0) << text.str();
  const nlohmann::json summary =
      nlohmann::json::parse(std::ifstream(dir_ + "/summary.json"));
  EXPECT_GE(summary["steps"].get<int64_t>(), 12) << summary.dump();
}

INSTANTIATE_TEST_SUITE_P(Modes, TlsJobTest, ::testing::Values("ps", "ring"));

}  // namespace
}  // namespace ferry

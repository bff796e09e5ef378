// Per-role authorization on real servers over loopback (tls_auth_fixture.h):
// role tokens (--role-tokens-file) and client certificates' names (san:
// lines) each let a role make only its own calls.
#include <set>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/tls_auth_fixture.h"

namespace ferry {
namespace {

using ferry::testing::GetCerts;
using ferry::testing::WriteFile;
using ::testing::HasSubstr;
using tls_test::kDeadline;
using tls_test::NewStub;
using tls_test::Outcome;
using tls_test::TlsAuthTest;

class RoleTokensTest : public TlsAuthTest {
 protected:
  // `base` with role tokens for "<role>-token" of every role, read from a
  // file as --role-tokens-file does.
  RpcSecurityConfig WithRoleTokens(RpcSecurityConfig base) {
    std::string text = "# role tokens\n";
    for (const char* role : {"worker", "shard", "coordinator", "operator"}) {
      const TokenDigest d = DigestToken(absl::StrCat(role, "-token"));
      absl::StrAppend(&text, role, " ",
                      absl::BytesToHexString(absl::string_view(
                          reinterpret_cast<const char*>(d.data()), d.size())),
                      "\n");
    }
    OpsFlags flags;
    flags.role_tokens_file = WriteFile(GetCerts().dir, "role-tokens", text);
    absl::StatusOr<RpcSecurityConfig> loaded = LoadRpcSecurity(flags);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    if (loaded.ok()) base.role_tokens = loaded->role_tokens;
    return base;
  }
  static RpcSecurityConfig Sending(RpcSecurityConfig client,
                                   const std::string& token) {
    client.token = token;
    return client;
  }
  // The calls in `allowed` passed security; every other one is
  // PERMISSION_DENIED naming the method.
  static void ExpectOnly(const std::vector<Outcome>& outcomes,
                         const std::set<std::string>& allowed,
                         const std::string& who) {
    ASSERT_EQ(outcomes.size(), 14u);
    for (const auto& [name, status] : outcomes) {
      if (allowed.contains(name)) {
        EXPECT_NE(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
            << who << " " << name << ": " << status.error_message();
        EXPECT_NE(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
            << who << " " << name << ": " << status.error_message();
      } else {
        EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
            << who << " " << name << ": " << status.error_message();
        EXPECT_THAT(status.error_message(), HasSubstr("may not call"));
      }
    }
  }
};

const std::set<std::string> kReadOnly = {
    "Coordinator.Status", "Coordinator.GetJob", "ParameterServer.ShardInfo"};

std::set<std::string> With(std::set<std::string> calls,
                           const std::set<std::string>& more) {
  calls.insert(more.begin(), more.end());
  return calls;
}

TEST_F(RoleTokensTest, EachRoleMakesOnlyItsOwnCallsOverMutualTls) {
  StartServers(WithRoleTokens(Config("server", "ca", true)));
  const RpcSecurityConfig client = Config("client", "ca");
  ExpectOnly(CallEveryMethod(Sending(client, "worker-token")),
             With(kReadOnly, {"ParameterServer.Push", "ParameterServer.Pull",
                              "Coordinator.Register", "Coordinator.Heartbeat",
                              "Coordinator.NextTask", "Coordinator.Leave",
                              "RingPeer.Exchange"}),
             "worker");
  ExpectOnly(CallEveryMethod(Sending(client, "coordinator-token")),
             With(kReadOnly,
                  {"ParameterServer.FinalizeStep", "ParameterServer.Restore",
                   "ParameterServer.Checkpoint", "RingPeer.GetWeights"}),
             "coordinator");
  ExpectOnly(CallEveryMethod(Sending(client, "operator-token")), kReadOnly,
             "operator");
  ExpectOnly(CallEveryMethod(Sending(client, "shard-token")), kReadOnly,
             "shard");
  ExpectAll(CallEveryMethod(Sending(client, "no-such-token")),
            grpc::StatusCode::UNAUTHENTICATED, "no known role");
  ExpectAll(CallEveryMethod(client), grpc::StatusCode::UNAUTHENTICATED,
            "missing bearer token");
}

TEST_F(RoleTokensTest, WorkerTokenCannotRestoreAShardWithoutTlsEither) {
  StartServers(WithRoleTokens(RpcSecurityConfig()));
  auto stub = NewStub<v1::ParameterServer>(
      servers_->ps.port, Sending(RpcSecurityConfig(), "worker-token"));
  grpc::ClientContext context;
  SetDeadline(context, kDeadline);
  v1::RestoreRequest request;
  request.set_job_id("job");
  request.set_version(0);
  request.set_generation(7);
  v1::RestoreResponse response;
  const grpc::Status status = stub->Restore(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(),
              HasSubstr("role worker may not call "
                        "ferry.v1.ParameterServer/Restore (allowed: "
                        "coordinator)"));
  // Nor may it fence the shard; the coordinator may. Nothing changed
  // before that (a Restore or Fence would raise the shard's generation).
  auto fence = [&](const std::string& token) {
    auto fencer = NewStub<v1::ParameterServer>(
        servers_->ps.port, Sending(RpcSecurityConfig(), token));
    grpc::ClientContext fence_context;
    SetDeadline(fence_context, kDeadline);
    v1::FenceRequest fence_request;
    fence_request.set_job_id("job");
    fence_request.set_generation(7);
    v1::FenceResponse fence_response;
    return fencer->Fence(&fence_context, fence_request, &fence_response);
  };
  EXPECT_EQ(fence("worker-token").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(servers_->shard->Info().max_generation, 0);
  EXPECT_TRUE(fence("coordinator-token").ok());
  EXPECT_EQ(servers_->shard->Info().max_generation, 7);
}
// Mutual TLS: the roles come from the client certificate's names, with no
// token. The server accepts a worker's URI SAN and the coordinator's DNS SAN.
TEST_F(RoleTokensTest, ClientCertificateNamesGiveRolesOverMutualTls) {
  RpcSecurityConfig server = Config("server", "ca", true);
  {
    OpsFlags flags;
    flags.tls_cert = GetCerts().Path("server.pem");
    flags.tls_key = GetCerts().Path("server.key");
    flags.tls_ca = GetCerts().Path("ca.pem");
    flags.require_client_cert = true;
    flags.role_tokens_file =
        WriteFile(GetCerts().dir, "role-sans",
                  "worker san:spiffe://ferry.test/worker\n"
                  "coordinator san:coordinator.ferry.test\n");
    absl::StatusOr<RpcSecurityConfig> loaded = LoadRpcSecurity(flags);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    server.role_tokens = loaded->role_tokens;
  }
  StartServers(server);
  ExpectOnly(CallEveryMethod(Config("worker_client", "ca")),
             With(kReadOnly, {"ParameterServer.Push", "ParameterServer.Pull",
                              "Coordinator.Register", "Coordinator.Heartbeat",
                              "Coordinator.NextTask", "Coordinator.Leave",
                              "RingPeer.Exchange"}),
             "worker certificate");
  ExpectOnly(CallEveryMethod(Config("coordinator_client", "ca")),
             With(kReadOnly,
                  {"ParameterServer.FinalizeStep", "ParameterServer.Restore",
                   "ParameterServer.Checkpoint", "RingPeer.GetWeights"}),
             "coordinator certificate");
  // A certificate of the right CA that names no role, and no token.
  ExpectAll(CallEveryMethod(Config("client", "ca")),
            grpc::StatusCode::UNAUTHENTICATED, "missing bearer token");
  // The coordinator's names on a certificate of another CA: no handshake.
  ExpectAll(CallEveryMethod(Config("rogue_coordinator", "ca")),
            grpc::StatusCode::UNAVAILABLE);
  // The worker's certificate cannot fence (or restore) the shard: nothing
  // changed; the coordinator's can.
  auto fence = [&](const std::string& cert) {
    auto stub =
        NewStub<v1::ParameterServer>(servers_->ps.port, Config(cert, "ca"));
    grpc::ClientContext context;
    SetDeadline(context, kDeadline);
    v1::FenceRequest request;
    request.set_job_id("job");
    request.set_generation(7);
    v1::FenceResponse response;
    return stub->Fence(&context, request, &response);
  };
  const grpc::Status denied = fence("worker_client");
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(),
              HasSubstr("role worker may not call "
                        "ferry.v1.ParameterServer/Fence"));
  EXPECT_EQ(servers_->shard->Info().max_generation, 0);
  EXPECT_TRUE(fence("coordinator_client").ok());
  EXPECT_EQ(servers_->shard->Info().max_generation, 7);
}

TEST_F(TlsAuthTest, CertificateNamesNeedMutualTls) {
  OpsFlags flags;
  flags.tls_cert = GetCerts().Path("server.pem");
  flags.tls_key = GetCerts().Path("server.key");
  flags.tls_ca = GetCerts().Path("ca.pem");
  flags.role_tokens_file = WriteFile(GetCerts().dir, "role-sans-no-mtls",
                                     "worker san:spiffe://ferry.test/worker\n");
  const absl::Status status = LoadRpcSecurity(flags).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("needs --require-client-cert"));
}

}  // namespace
}  // namespace ferry

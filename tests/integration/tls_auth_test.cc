// TLS, mutual TLS and the bearer token on real servers over loopback
// (tls_auth_fixture.h): which transports and credentials get through.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/tls_auth_fixture.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;
using tls_test::kDeadline;
using tls_test::kToken;
using tls_test::NewStub;
using tls_test::TlsAuthTest;

TEST_F(TlsAuthTest, PlaintextByDefault) {
  StartServers(RpcSecurityConfig());
  ExpectAllAccepted(CallEveryMethod(RpcSecurityConfig()));
}

TEST_F(TlsAuthTest, TlsServerRejectsPlaintextClient) {
  StartServers(Config("server", "ca"));
  ExpectAll(CallEveryMethod(RpcSecurityConfig()),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsAuthTest, TlsClientRejectsPlaintextServer) {
  StartServers(RpcSecurityConfig());
  ExpectAll(CallEveryMethod(Config("", "ca")), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsAuthTest, TlsWithCaOnlyClientWorks) {
  StartServers(Config("server", "ca"));
  ExpectAllAccepted(CallEveryMethod(Config("", "ca")));
}

TEST_F(TlsAuthTest, ClientTrustingWrongCaIsRejected) {
  StartServers(Config("server", "ca"));
  ExpectAll(CallEveryMethod(Config("", "other_ca")),
            grpc::StatusCode::UNAVAILABLE);
  ExpectAll(CallEveryMethod(Config("client", "other_ca")),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsAuthTest, MutualTlsRejectsClientWithoutCertificate) {
  StartServers(Config("server", "ca", /*require_client_cert=*/true));
  ExpectAll(CallEveryMethod(Config("", "ca")), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsAuthTest, MutualTlsRejectsCertificateFromOtherCa) {
  StartServers(Config("server", "ca", /*require_client_cert=*/true));
  ExpectAll(CallEveryMethod(Config("rogue", "ca")),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsAuthTest, MutualTlsAcceptsClientCertificate) {
  StartServers(Config("server", "ca", /*require_client_cert=*/true));
  ExpectAllAccepted(CallEveryMethod(Config("client", "ca")));
}

TEST_F(TlsAuthTest, MissingTokenIsUnauthenticated) {
  StartServers(Config("server", "ca", true, kToken));
  ExpectAll(CallEveryMethod(Config("client", "ca")),
            grpc::StatusCode::UNAUTHENTICATED, "missing bearer token");
}

TEST_F(TlsAuthTest, WrongTokenIsUnauthenticated) {
  StartServers(Config("server", "ca", true, kToken));
  ExpectAll(CallEveryMethod(Config("client", "ca", false, "not-the-token")),
            grpc::StatusCode::UNAUTHENTICATED, "wrong bearer token");
  // A prefix of the right token is wrong too.
  ExpectAll(CallEveryMethod(Config("client", "ca", false, "s3cret")),
            grpc::StatusCode::UNAUTHENTICATED, "wrong bearer token");
}

TEST_F(TlsAuthTest, RightCaCertificateAndTokenWork) {
  StartServers(Config("server", "ca", true, kToken));
  ExpectAllAccepted(CallEveryMethod(Config("client", "ca", false, kToken)));
}

TEST_F(TlsAuthTest, TokenWithoutTls) {
  RpcSecurityConfig server;
  server.token = kToken;
  StartServers(server);
  ExpectAll(CallEveryMethod(RpcSecurityConfig()),
            grpc::StatusCode::UNAUTHENTICATED, "missing bearer token");
  RpcSecurityConfig client;
  client.token = kToken;
  ExpectAllAccepted(CallEveryMethod(client));
}

// Role tokens (--role-tokens-file): the servers accept the digests of four
TEST_F(TlsAuthTest, ProcessConfigReachesDefaultMakeChannel) {
  StartServers(Config("server", "ca", true, kToken));
  // MakeChannel(address) uses the installed config: mTLS and the token.
  auto stub = v1::ParameterServer::NewStub(
      MakeChannel(absl::StrCat("localhost:", servers_->ps.port)));
  grpc::ClientContext context;
  SetDeadline(context, kDeadline);
  v1::ShardInfoResponse response;
  grpc::Status status =
      stub->ShardInfo(&context, v1::ShardInfoRequest(), &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(TlsAuthTest, ClientOnlyConfigCannotServe) {
  // TLS on (a CA) but no certificate: no plaintext fallback, no port.
  SetProcessRpcSecurityForTesting(Config("", "ca"));
  auto ring = StartRingPeerServer("127.0.0.1:0");
  EXPECT_EQ(ring.status().code(), absl::StatusCode::kUnavailable)
      << ring.status();
}

}  // namespace
}  // namespace ferry

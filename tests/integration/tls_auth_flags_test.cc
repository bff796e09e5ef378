// LoadRpcSecurity's checks of the security flags (proto/rpc_security.h):
// files that are missing, empty or not PEM, flags that do not go together,
// and the token file. Split from tls_auth_test.cc, which runs real servers.
#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/rpc_security.h"
#include "tests/integration/tls_certs_fixture.h"

namespace ferry {
namespace {

using ferry::testing::MakeTempDir;
using ferry::testing::WriteFile;

using ::testing::HasSubstr;

// LoadRpcSecurity's checks need no real certificates (it reads PEM files,
// it does not parse them).
class TlsAuthFlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    ASSERT_FALSE(dir_.empty());
    pem_ = WriteFile(dir_, "x.pem", "-----BEGIN CERTIFICATE-----\nAA==\n");
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // The error of LoadRpcSecurity(flags), which must be INVALID_ARGUMENT.
  static std::string Error(const OpsFlags& flags) {
    absl::StatusOr<RpcSecurityConfig> config = LoadRpcSecurity(flags);
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument)
        << config.status();
    return std::string(config.status().message());
  }

  std::string dir_, pem_;
};

TEST_F(TlsAuthFlagsTest, NothingSetIsPlaintext) {
  absl::StatusOr<RpcSecurityConfig> config = LoadRpcSecurity(OpsFlags());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->tls());
  EXPECT_TRUE(config->token.empty());
}

TEST_F(TlsAuthFlagsTest, CertAndKeyComeTogether) {
  OpsFlags flags;
  flags.tls_cert = pem_;
  EXPECT_THAT(Error(flags), HasSubstr("--tls-key"));
  flags = OpsFlags();
  flags.tls_key = pem_;
  EXPECT_THAT(Error(flags), HasSubstr("--tls-cert"));
}

TEST_F(TlsAuthFlagsTest, RequireClientCertNeedsTlsAndCa) {
  OpsFlags flags;
  flags.require_client_cert = true;
  flags.tls_ca = pem_;
  EXPECT_THAT(Error(flags), HasSubstr("--require-client-cert needs TLS"));
  flags.tls_ca.clear();
  flags.tls_cert = flags.tls_key = pem_;
  EXPECT_THAT(Error(flags), HasSubstr("--require-client-cert needs --tls-ca"));
  flags.tls_ca = pem_;
  absl::StatusOr<RpcSecurityConfig> config = LoadRpcSecurity(flags);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->tls());
  EXPECT_TRUE(config->require_client_cert);
}

TEST_F(TlsAuthFlagsTest, UnreadableOrNonPemFilesNameFlagAndPath) {
  const std::string missing = dir_ + "/missing.pem";
  OpsFlags flags;
  flags.tls_ca = missing;
  EXPECT_THAT(Error(flags), HasSubstr("--tls-ca " + missing));
  flags = OpsFlags();
  flags.tls_cert = pem_;
  flags.tls_key = missing;
  EXPECT_THAT(Error(flags), HasSubstr("--tls-key " + missing));
  const std::string der = WriteFile(dir_, "x.der", "0\x82\x01");
  flags.tls_key = der;
  EXPECT_THAT(Error(flags), HasSubstr("--tls-key " + der + ": not a PEM file"));
  flags = OpsFlags();
  flags.auth_token_file = missing;
  EXPECT_THAT(Error(flags), HasSubstr("--auth-token-file " + missing));
}

TEST_F(TlsAuthFlagsTest, TokenFile) {
  OpsFlags flags;
  flags.auth_token_file = WriteFile(dir_, "token", "abc-123\r\n \n");
  absl::StatusOr<RpcSecurityConfig> config = LoadRpcSecurity(flags);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->token, "abc-123");
  EXPECT_FALSE(config->tls());

  flags.auth_token_file = WriteFile(dir_, "empty", "");
  EXPECT_THAT(Error(flags), HasSubstr("--auth-token-file"));
  flags.auth_token_file = WriteFile(dir_, "blank", "\n\n");
  EXPECT_THAT(Error(flags), HasSubstr("the token is empty"));
  flags.auth_token_file = WriteFile(dir_, "space", "two words\n");
  EXPECT_THAT(Error(flags),
              HasSubstr("--auth-token-file " + flags.auth_token_file));
  flags.auth_token_file = WriteFile(dir_, "ctl", "a\x01b");
  EXPECT_THAT(Error(flags), HasSubstr("visible ASCII"));
  flags.auth_token_file = WriteFile(dir_, "utf8", "p\xc3\xa4ss");
  EXPECT_THAT(Error(flags), HasSubstr("visible ASCII"));
}

}  // namespace
}  // namespace ferry

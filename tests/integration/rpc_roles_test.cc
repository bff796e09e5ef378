// The per-role table and the role tokens file (proto/rpc_roles.h), without
// servers; tls_auth_test.cc's RoleTokensTest runs them on real ones.
#include "proto/rpc_roles.h"

#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

std::string Hex(const TokenDigest& d) {
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
}

TEST(RpcRolesTest, OnlyTheCoordinatorDrivesShardsAndReadsWeights) {
  for (RpcMethod m : {RpcMethod::kPsFinalizeStep, RpcMethod::kPsCheckpoint,
                      RpcMethod::kPsRestore, RpcMethod::kPsFence,
                      RpcMethod::kPsReadTables, RpcMethod::kRingGetWeights}) {
    EXPECT_EQ(AllowedRoles(m), RoleBit(RpcRole::kCoordinator)) << MethodName(m);
  }
  for (RpcMethod m :
       {RpcMethod::kPsPush, RpcMethod::kPsPull, RpcMethod::kCoordinatorRegister,
        RpcMethod::kCoordinatorNextTask, RpcMethod::kRingExchange}) {
    EXPECT_EQ(AllowedRoles(m), RoleBit(RpcRole::kWorker)) << MethodName(m);
  }
  EXPECT_EQ(AllowedRoles(RpcMethod::kCoordinatorStatus), kAllRoles);
  EXPECT_EQ(MethodName(RpcMethod::kPsRestore),
            "ferry.v1.ParameterServer/Restore");
  EXPECT_EQ(RoleNames(RoleBit(RpcRole::kWorker) | RoleBit(RpcRole::kOperator)),
            "worker,operator");
}

TEST(RpcRolesTest, DigestIsSha256OfTheTokenBytes) {
  // printf %s abc | sha256sum
  EXPECT_EQ(Hex(DigestToken("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(RpcRolesTest, TokensFileMapsTokensToRoles) {
  const std::string text = absl::StrCat(
      "# comment\n\n", "worker ", Hex(DigestToken("w1")), "\n", "  worker\t",
      Hex(DigestToken("w2")), "  \n",  // a second (rotation)
      "coordinator ", Hex(DigestToken("c")), "\n");
  absl::StatusOr<RoleTokens> tokens = ParseRoleTokens(text, "f");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->RolesOf("w1"), RoleBit(RpcRole::kWorker));
  EXPECT_EQ(tokens->RolesOf("w2"), RoleBit(RpcRole::kWorker));
  EXPECT_EQ(tokens->RolesOf("c"), RoleBit(RpcRole::kCoordinator));
  EXPECT_EQ(tokens->RolesOf("w"), 0);
  EXPECT_EQ(tokens->RolesOf(""), 0);
  const std::string w1 = "w1", c = "c", other = "x";
  EXPECT_TRUE(AuthorizeRoles(*tokens, &w1, RpcMethod::kPsPush).ok());
  EXPECT_TRUE(AuthorizeRoles(*tokens, &c, RpcMethod::kPsRestore).ok());
  const absl::Status denied =
      AuthorizeRoles(*tokens, &w1, RpcMethod::kPsRestore);
  EXPECT_TRUE(absl::IsPermissionDenied(denied)) << denied;
  EXPECT_THAT(std::string(denied.message()),
              HasSubstr("role worker may not call "
                        "ferry.v1.ParameterServer/Restore"));
  EXPECT_TRUE(absl::IsUnauthenticated(
      AuthorizeRoles(*tokens, &other, RpcMethod::kPsPush)));
  EXPECT_TRUE(absl::IsUnauthenticated(
      AuthorizeRoles(*tokens, nullptr, RpcMethod::kCoordinatorStatus)));
}

TEST(RpcRolesTest, CertificateNamesMapToRolesBesideTokens) {
  const std::string text = absl::StrCat("worker san:spiffe://f/worker\n",
                                        "coordinator ", Hex(DigestToken("c")),
                                        "\n", "coordinator san:coord.f.svc\n");
  absl::StatusOr<RoleTokens> tokens = ParseRoleTokens(text, "f");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->RolesOfSans({"x", "spiffe://f/worker"}),
            RoleBit(RpcRole::kWorker));
  EXPECT_EQ(tokens->RolesOfSans({"spiffe://f/worker/extra"}), 0);
  EXPECT_EQ(tokens->RolesOfSans({}), 0);
  const std::vector<std::string> worker = {"spiffe://f/worker"};
  EXPECT_TRUE(
      AuthorizeRoles(*tokens, nullptr, RpcMethod::kPsPush, worker).ok());
  const absl::Status denied =
      AuthorizeRoles(*tokens, nullptr, RpcMethod::kPsRestore, worker);
  EXPECT_TRUE(absl::IsPermissionDenied(denied)) << denied;
  // A token and a certificate: the roles of both.
  const std::string c = "c";
  EXPECT_TRUE(AuthorizeRoles(*tokens, &c, RpcMethod::kPsRestore, worker).ok());
  const absl::Status unknown =
      AuthorizeRoles(*tokens, nullptr, RpcMethod::kPsPush, {"other"});
  EXPECT_TRUE(absl::IsUnauthenticated(unknown)) << unknown;
  EXPECT_THAT(std::string(unknown.message()), HasSubstr("names no known role"));
  // A file of certificate names only is a valid file.
  EXPECT_TRUE(ParseRoleTokens("operator san:ops\n", "f").ok());
}

TEST(RpcRolesTest, MalformedTokensFilesAreRefusedWithTheLine) {
  const std::string digest = Hex(DigestToken("t"));
  struct Case {
    std::string text, why;
  };
  for (const Case& c : std::vector<Case>{
           {"admin " + digest + "\n", "f:1: unknown role \"admin\""},
           {"# x\nworker abc\n", "f:2: the digest is not 64 hex digits"},
           {"worker " + digest.substr(0, 63) + "g\n", "not 64 hex digits"},
           {"worker " + digest + " extra\n", "f:1: not two fields"},
           {"worker\n", "not two fields"},
           {"# only comments\n\n", "no role token"},
           {"worker san:\n", "f:1: san: names no certificate name"},
           {"admin san:x\n", "unknown role"},
       }) {
    const absl::Status s = ParseRoleTokens(c.text, "f").status();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << c.text;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.why)) << c.text;
  }
}

}  // namespace
}  // namespace ferry

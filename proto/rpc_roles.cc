#include "proto/rpc_roles.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ferry {
namespace {

constexpr RoleSet kWorker = RoleBit(RpcRole::kWorker);
constexpr RoleSet kCoordinator = RoleBit(RpcRole::kCoordinator);

struct MethodInfo {
  RpcMethod method;
  const char* name;
  RoleSet roles;
};

// In RpcMethod order.
constexpr MethodInfo kMethods[kNumRpcMethods] = {
    {RpcMethod::kCoordinatorRegister, "ferry.v1.Coordinator/Register", kWorker},
    {RpcMethod::kCoordinatorHeartbeat, "ferry.v1.Coordinator/Heartbeat",
     kWorker},
    {RpcMethod::kCoordinatorLeave, "ferry.v1.Coordinator/Leave", kWorker},
    {RpcMethod::kCoordinatorGetJob, "ferry.v1.Coordinator/GetJob", kAllRoles},
    {RpcMethod::kCoordinatorNextTask, "ferry.v1.Coordinator/NextTask", kWorker},
    {RpcMethod::kCoordinatorStatus, "ferry.v1.Coordinator/Status", kAllRoles},
    {RpcMethod::kCoordinatorDefineModel, "ferry.v1.Coordinator/DefineModel",
     kWorker},
    {RpcMethod::kCoordinatorModelValues, "ferry.v1.Coordinator/ModelValues",
     kWorker},
    {RpcMethod::kPsPush, "ferry.v1.ParameterServer/Push", kWorker},
    {RpcMethod::kPsPull, "ferry.v1.ParameterServer/Pull", kWorker},
    {RpcMethod::kPsPullRows, "ferry.v1.ParameterServer/PullRows", kWorker},
    {RpcMethod::kPsFinalizeStep, "ferry.v1.ParameterServer/FinalizeStep",
     kCoordinator},
    {RpcMethod::kPsShardInfo, "ferry.v1.ParameterServer/ShardInfo", kAllRoles},
    {RpcMethod::kPsCheckpoint, "ferry.v1.ParameterServer/Checkpoint",
     kCoordinator},
    {RpcMethod::kPsRestore, "ferry.v1.ParameterServer/Restore", kCoordinator},
    {RpcMethod::kPsFence, "ferry.v1.ParameterServer/Fence", kCoordinator},
    {RpcMethod::kPsReadTables, "ferry.v1.ParameterServer/ReadTables",
     kCoordinator},
    {RpcMethod::kRingExchange, "ferry.v1.RingPeer/Exchange", kWorker},
    {RpcMethod::kRingGetWeights, "ferry.v1.RingPeer/GetWeights", kCoordinator},
    {RpcMethod::kRingOfferSharedMemory, "ferry.v1.RingPeer/OfferSharedMemory",
     kWorker},
};

constexpr bool TableInOrder() {
  for (int i = 0; i < kNumRpcMethods; ++i) {
    if (static_cast<int>(kMethods[i].method) != i) return false;
  }
  return true;
}
static_assert(TableInOrder(), "kMethods must list RpcMethod in order");

constexpr RpcRole kRoles[] = {RpcRole::kWorker, RpcRole::kShard,
                              RpcRole::kCoordinator, RpcRole::kOperator};

}  // namespace

absl::string_view MethodName(RpcMethod method) {
  return kMethods[static_cast<int>(method)].name;
}

RoleSet AllowedRoles(RpcMethod method) {
  return kMethods[static_cast<int>(method)].roles;
}

absl::string_view RoleName(RpcRole role) {
  switch (role) {
    case RpcRole::kWorker:
      return "worker";
    case RpcRole::kShard:
      return "shard";
    case RpcRole::kCoordinator:
      return "coordinator";
    case RpcRole::kOperator:
      return "operator";
  }
  return "unknown";
}

std::string RoleNames(RoleSet roles) {
  std::string out;
  for (RpcRole role : kRoles) {
    if ((roles & RoleBit(role)) == 0) continue;
    absl::StrAppend(&out, out.empty() ? "" : ",", RoleName(role));
  }
  return out.empty() ? "none" : out;
}

absl::StatusOr<RpcRole> ParseRole(absl::string_view name) {
  for (RpcRole role : kRoles) {
    if (name == RoleName(role)) return role;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown role \"", name,
                   "\" (roles: worker, shard, coordinator, operator)"));
}

TokenDigest DigestToken(absl::string_view token) {
  TokenDigest digest{};
  unsigned int size = 0;
  EVP_Digest(token.data(), token.size(), digest.data(), &size, EVP_sha256(),
             nullptr);
  return digest;
}

RoleSet RoleTokens::RolesOf(absl::string_view token) const {
  const TokenDigest presented = DigestToken(token);
  RoleSet roles = 0;
  for (const Entry& e : entries) {
    uint8_t diff = 0;
    for (size_t i = 0; i < presented.size(); ++i) {
      diff |= static_cast<uint8_t>(presented[i] ^ e.digest[i]);
    }
    if (diff == 0) roles |= RoleBit(e.role);
  }
  return roles;
}

RoleSet RoleTokens::RolesOfSans(
    const std::vector<std::string>& peer_sans) const {
  RoleSet roles = 0;
  for (const SanEntry& e : sans) {
    if (std::find(peer_sans.begin(), peer_sans.end(), e.san) != peer_sans.end())
      roles |= RoleBit(e.role);
  }
  return roles;
}

absl::StatusOr<RoleTokens> ParseRoleTokens(absl::string_view text,
                                           absl::string_view source) {
  RoleTokens tokens;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    auto error = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", line_number, ": ", why,
                       " (expected \"<role> <sha256 of the token, 64 hex "
                       "digits>\" or \"<role> san:<certificate name>\")"));
    };
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() != 2) return error("not two fields");
    absl::StatusOr<RpcRole> role = ParseRole(fields[0]);
    if (!role.ok()) return error(role.status().message());
    if (absl::StartsWith(fields[1], "san:")) {
      const absl::string_view san = fields[1].substr(4);
      if (san.empty()) return error("san: names no certificate name");
      tokens.sans.push_back({*role, std::string(san)});
      continue;
    }
    if (fields[1].size() != 64 ||
        !std::all_of(fields[1].begin(), fields[1].end(), [](char c) {
          return std::isxdigit(static_cast<unsigned char>(c)) != 0;
        })) {
      return error("the digest is not 64 hex digits");
    }
    const std::string bytes = absl::HexStringToBytes(fields[1]);
    RoleTokens::Entry entry{*role, {}};
    std::copy(bytes.begin(), bytes.end(), entry.digest.begin());
    tokens.entries.push_back(entry);
  }
  if (tokens.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": no role token in the file"));
  }
  return tokens;
}

absl::Status AuthorizeRoles(const RoleTokens& tokens, const std::string* bearer,
                            RpcMethod method,
                            const std::vector<std::string>& peer_sans) {
  const RoleSet roles = (bearer == nullptr ? 0 : tokens.RolesOf(*bearer)) |
                        tokens.RolesOfSans(peer_sans);
  if (roles == 0) {
    if (bearer != nullptr)
      return absl::UnauthenticatedError("bearer token of no known role");
    return absl::UnauthenticatedError(
        peer_sans.empty() ? "missing bearer token"
                          : "missing bearer token, and the client "
                            "certificate names no known role");
  }
  if ((roles & AllowedRoles(method)) == 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        "role ", RoleNames(roles), " may not call ", MethodName(method),
        " (allowed: ", RoleNames(AllowedRoles(method)), ")"));
  }
  return absl::OkStatus();
}

}  // namespace ferry

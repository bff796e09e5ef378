// Per-role authorization of ferry's RPCs: which role may call which method,
// and the role tokens a process accepts (--role-tokens-file).
//
// Roles:
//   worker       trains: registers, leases, pushes, pulls, reports, serves
//                and calls the ring's Exchange;
//   shard        a PS shard: reads the job from the coordinator;
//   coordinator  drives the job: finalizes, fences, checkpoints and
//                restores shards, reads their tables and ring members'
//                weights for the evaluation;
//   operator     a person or tool watching the job (ferry status): reads
//                status, the job spec and shard info. No RPC drains or
//                stops a job: that is a signal (SIGTERM) to the process.
// Every role may call the read-only Coordinator.Status, Coordinator.GetJob
// and ParameterServer.ShardInfo. docs/operations.md has the whole table.
//
// Role tokens file: one line per accepted credential, either
//   "<role> <sha256>": a bearer token, where <sha256> is the 64 hex digits
//       of SHA-256 over the token's bytes (what `printf %s "$TOKEN" |
//       sha256sum` prints). Only digests are stored, so a process that must
//       recognize the coordinator's token (a ring worker serving
//       GetWeights) cannot send it;
//   "<role> san:<name>": a client certificate (mutual TLS, verified against
//       --tls-ca) whose subject alternative names include <name> exactly,
//       e.g. "worker san:spiffe://ferry.example/worker" (a URI SAN) or
//       "coordinator san:coordinator.ferry.svc" (a DNS SAN).
// Blank lines and lines starting with '#' are ignored; a role may have
// several lines (rotation). A caller's roles are those of its token and of
// its certificate together.
//
// Thread safety: pure functions and a plain value type.
#ifndef FERRY_PROTO_RPC_ROLES_H_
#define FERRY_PROTO_RPC_ROLES_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ferry {

enum class RpcRole : uint8_t {
  kWorker = 1,
  kShard = 2,
  kCoordinator = 4,
  kOperator = 8,
};
// A set of roles (bitwise OR of RpcRole values).
using RoleSet = uint8_t;
inline constexpr RoleSet RoleBit(RpcRole role) {
  return static_cast<RoleSet>(role);
}
inline constexpr RoleSet kAllRoles = 0x0f;

// Every served method of ferry.v1.Coordinator, ParameterServer, RingPeer.
enum class RpcMethod {
  kCoordinatorRegister,
  kCoordinatorHeartbeat,
  kCoordinatorLeave,
  kCoordinatorGetJob,
  kCoordinatorNextTask,
  kCoordinatorStatus,
  kCoordinatorDefineModel,
  kCoordinatorModelValues,
  kPsPush,
  kPsPull,
  kPsPullRows,
  kPsFinalizeStep,
  kPsShardInfo,
  kPsCheckpoint,
  kPsRestore,
  kPsFence,
  kPsReadTables,
  kRingExchange,
  kRingGetWeights,
  kRingOfferSharedMemory,
};
inline constexpr int kNumRpcMethods =
    static_cast<int>(RpcMethod::kRingOfferSharedMemory) + 1;

// "ferry.v1.ParameterServer/Restore".
absl::string_view MethodName(RpcMethod method);
// The roles that may call `method`.
RoleSet AllowedRoles(RpcMethod method);

// "worker", "shard", "coordinator", "operator".
absl::string_view RoleName(RpcRole role);
// The names in `roles`, comma-separated ("worker,operator"); "none".
std::string RoleNames(RoleSet roles);
// INVALID_ARGUMENT naming the known roles for anything else.
absl::StatusOr<RpcRole> ParseRole(absl::string_view name);

using TokenDigest = std::array<uint8_t, 32>;  // SHA-256
TokenDigest DigestToken(absl::string_view token);

// The tokens and certificate names a process accepts, by role.
struct RoleTokens {
  struct Entry {
    RpcRole role;
    TokenDigest digest;
  };
  struct SanEntry {
    RpcRole role;
    std::string san;
  };
  std::vector<Entry> entries;
  std::vector<SanEntry> sans;

  bool empty() const { return entries.empty() && sans.empty(); }
  // The roles whose tokens include `token` (compared by digest, in time
  // that does not depend on where the digests differ); 0: none.
  RoleSet RolesOf(absl::string_view token) const;
  // The roles named by any of a verified client certificate's subject
  // alternative names `peer_sans`; 0: none.
  RoleSet RolesOfSans(const std::vector<std::string>& peer_sans) const;
};

// Parses a role tokens file's text (`source` names it in errors).
// INVALID_ARGUMENT with the line number for an unknown role, a digest that
// is not 64 hex digits, extra fields, or a file with no entry.
absl::StatusOr<RoleTokens> ParseRoleTokens(absl::string_view text,
                                           absl::string_view source);

// The decision for one call under role tokens: OK when `bearer` (the
// presented token; nullptr: none) or the caller's verified certificate
// names `peer_sans` (empty: none or no TLS) give a role that may call
// `method`; UNAUTHENTICATED when neither gives a role; PERMISSION_DENIED
// naming the caller's roles and the method otherwise.
absl::Status AuthorizeRoles(const RoleTokens& tokens, const std::string* bearer,
                            RpcMethod method,
                            const std::vector<std::string>& peer_sans = {});

}  // namespace ferry

#endif  // FERRY_PROTO_RPC_ROLES_H_

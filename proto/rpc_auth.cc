#include "proto/rpc_auth.h"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "proto/rpc_util.h"

namespace ferry {
namespace {

// Equal contents, in time that depends only on the lengths.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = a.size() < b.size() ? a.size() : b.size();
  for (size_t i = 0; i < n; ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

}  // namespace

grpc::Status CheckCallAuth(const grpc::CallbackServerContext* context,
                           const std::string& token) {
  if (token.empty()) return grpc::Status::OK;
  constexpr absl::string_view kScheme = "bearer ";
  bool present = false;
  bool match = false;
  const auto range = context->client_metadata().equal_range(kAuthorizationKey);
  for (auto it = range.first; it != range.second; ++it) {
    const absl::string_view value(it->second.data(), it->second.size());
    if (value.size() < kScheme.size() ||
        !absl::EqualsIgnoreCase(value.substr(0, kScheme.size()), kScheme)) {
      continue;
    }
    present = true;
    match |= ConstantTimeEquals(value.substr(kScheme.size()), token);
  }
  if (!present) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "missing bearer token");
  }
  if (!match) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "wrong bearer token");
  }
  return grpc::Status::OK;
}

bool IsInProcessCall(const grpc::ServerContextBase* context) {
  bool marked = false;
  const auto range = context->client_metadata().equal_range(kInProcessKey);
  for (auto it = range.first; it != range.second; ++it) {
    marked |= ConstantTimeEquals(
        absl::string_view(it->second.data(), it->second.size()),
        InProcessSecret());
  }
  return marked;
}

grpc::Status AuthorizeCall(const grpc::CallbackServerContext* context,
                           RpcMethod method) {
  // A call over an in-process channel is this process's own: a worker
  // calling the shard it hosts (ps/shard_host.h). It has no certificate or
  // token to show: it is a worker's call.
  if (IsInProcessCall(context)) {
    return (AllowedRoles(method) & RoleBit(RpcRole::kWorker)) != 0
               ? grpc::Status::OK
               : grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                              absl::StrCat("an in-process call is a worker's "
                                           "and may not call ",
                                           MethodName(method)));
  }
  const RpcSecurityConfig& config = ProcessRpcSecurity();
  if (config.role_tokens.empty()) return CheckCallAuth(context, config.token);
  constexpr absl::string_view kScheme = "bearer ";
  std::optional<std::string> bearer;
  const auto range = context->client_metadata().equal_range(kAuthorizationKey);
  for (auto it = range.first; it != range.second && !bearer; ++it) {
    const absl::string_view value(it->second.data(), it->second.size());
    if (value.size() >= kScheme.size() &&
        absl::EqualsIgnoreCase(value.substr(0, kScheme.size()), kScheme)) {
      bearer = std::string(value.substr(kScheme.size()));
    }
  }
  const absl::Status status = AuthorizeRoles(
      config.role_tokens, bearer ? &*bearer : nullptr, method,
      config.role_tokens.sans.empty() ? std::vector<std::string>()
                                      : PeerCertificateNames(context));
  return ToGrpcStatus(status);
}

std::vector<std::string> PeerCertificateNames(
    const grpc::CallbackServerContext* context) {
  std::vector<std::string> names;
  const std::shared_ptr<const grpc::AuthContext> auth = context->auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return names;
  // Every SAN kind (DNS, URI, email, IP) is in the first; the others are
  // read too in case a gRPC version lists some kind only there.
  for (const char* property :
       {"x509_subject_alternative_name", "peer_dns", "peer_uri"}) {
    for (const grpc::string_ref& value : auth->FindPropertyValues(property)) {
      std::string name(value.data(), value.size());
      if (std::find(names.begin(), names.end(), name) == names.end())
        names.push_back(std::move(name));
    }
  }
  return names;
}

grpc::ServerUnaryReactor* RejectUnary(grpc::CallbackServerContext* context,
                                      const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

}  // namespace ferry

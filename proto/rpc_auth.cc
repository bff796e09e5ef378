#include "proto/rpc_auth.h"

#include <cstddef>
#include <optional>
#include <string>

#include "absl/strings/match.h"
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

grpc::Status AuthorizeCall(const grpc::CallbackServerContext* context,
                           RpcMethod method) {
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
  const absl::Status status =
      AuthorizeRoles(config.role_tokens, bearer ? &*bearer : nullptr, method);
  return ToGrpcStatus(status);
}

grpc::ServerUnaryReactor* RejectUnary(grpc::CallbackServerContext* context,
                                      const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

}  // namespace ferry

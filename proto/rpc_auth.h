// The bearer-token check of every served ferry call, and reactors that
// refuse a call at once, for the callback-API adapters.
//
// Every method of ferry.v1.Coordinator, ferry.v1.ParameterServer and
// ferry.v1.RingPeer starts with (proto/unary_handler.h does it)
//
//   if (grpc::Status auth = AuthorizeCall(context, method); !auth.ok()) {
//     return RejectUnary(context, auth);  // or RejectRead<T> / RejectWrite<T>
//   }
//
// The check lives in the adapters because gRPC 1.51 aborts when an
// AuthMetadataProcessor is set on insecure server credentials, and a token
// must work with and without TLS.
//
// NOT checked: grpc.health.v1 (Kubernetes probes cannot send a token) and
// the reflection service (it describes the API, it serves no data). Both
// are reachable without a token on every port that serves them.
#ifndef FERRY_PROTO_RPC_AUTH_H_
#define FERRY_PROTO_RPC_AUTH_H_

#include <string>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "proto/rpc_roles.h"
#include "proto/rpc_security.h"

namespace ferry {

// OK when `token` is empty (no token required) or when `context`'s client
// metadata holds `authorization: Bearer <token>` (scheme case-insensitive,
// token compared in constant time). Otherwise UNAUTHENTICATED: "missing
// bearer token" when there is no Bearer authorization, "wrong bearer token"
// when it differs.
grpc::Status CheckCallAuth(const grpc::CallbackServerContext* context,
                           const std::string& token);

// The check of a call of `method` under the process's config
// (ProcessRpcSecurity()): with role tokens, AuthorizeRoles over the call's
// bearer token (UNAUTHENTICATED or PERMISSION_DENIED); without them,
// CheckCallAuth against the shared token. An in-process call
// (IsInProcessCall: a worker calling the shard its process hosts) is a
// worker's whatever the config: OK for the worker's methods,
// PERMISSION_DENIED for the others.
grpc::Status AuthorizeCall(const grpc::CallbackServerContext* context,
                           RpcMethod method);

// Whether the call came over this process's in-process channel
// (MakeInProcessChannel, proto/rpc_util.h): it carries the process's
// in-process secret, which no remote caller can know.
bool IsInProcessCall(const grpc::ServerContextBase* context);

// The subject alternative names of the caller's client certificate, when
// it presented one the server verified (mutual TLS); empty otherwise.
std::vector<std::string> PeerCertificateNames(
    const grpc::CallbackServerContext* context);

// Finishes a unary call with `status` at once and returns its reactor.
grpc::ServerUnaryReactor* RejectUnary(grpc::CallbackServerContext* context,
                                      const grpc::Status& status);

// A client-streaming reactor that finishes with `status` without reading
// and deletes itself when done.
template <typename Request>
class RejectedReadReactor final : public grpc::ServerReadReactor<Request> {
 public:
  explicit RejectedReadReactor(const grpc::Status& status) {
    this->Finish(status);
  }
  void OnDone() override { delete this; }
};

// A server-streaming reactor that finishes with `status` without writing
// and deletes itself when done.
template <typename Response>
class RejectedWriteReactor final : public grpc::ServerWriteReactor<Response> {
 public:
  explicit RejectedWriteReactor(const grpc::Status& status) {
    this->Finish(status);
  }
  void OnDone() override { delete this; }
};

template <typename Request>
grpc::ServerReadReactor<Request>* RejectRead(const grpc::Status& status) {
  return new RejectedReadReactor<Request>(status);
}

template <typename Response>
grpc::ServerWriteReactor<Response>* RejectWrite(const grpc::Status& status) {
  return new RejectedWriteReactor<Response>(status);
}

}  // namespace ferry

#endif  // FERRY_PROTO_RPC_AUTH_H_

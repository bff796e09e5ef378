// gRPC glue shared by every service adapter and client: status conversion,
// deadlines, channel and server options. The only place that converts
// between absl::Status and grpc::Status.
#ifndef FERRY_PROTO_RPC_UTIL_H_
#define FERRY_PROTO_RPC_UTIL_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/peer_limits.h"  // kMaxMessageBytes
#include "grpcpp/grpcpp.h"
#include "proto/rpc_security.h"

namespace ferry {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// Sets a deadline `timeout` from now on `context`.
void SetDeadline(grpc::ClientContext& context, absl::Duration timeout);

// A channel to `address` with ferry's options: raised message limits, no
// compression, a dedicated subchannel (one connection per peer pair),
// keepalive so dead peers are noticed; and the process's security
// (ProcessRpcSecurity(): TLS / mTLS credentials, the bearer token on every
// call). With TLS, the host part of `address` must match a SAN of the
// server's certificate.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address);
// The same with an explicit security config instead of the process's
// (tests, or a process that calls with other credentials than it serves).
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const RpcSecurityConfig& security);

// A channel to `server`, built in this process, over gRPC's in-process
// transport: no socket, no TLS, no bearer token, the same services and
// message limits. Every call on it must be marked (MarkInProcessCall), or
// the server authorizes it as a remote one. `server` must outlive the
// channel's calls.
std::shared_ptr<grpc::Channel> MakeInProcessChannel(grpc::Server* server);
// Marks a call on a MakeInProcessChannel channel as this process's own
// (IsInProcessCall, proto/rpc_auth.h) with the process's in-process secret.
// Metadata on the context, not a client interceptor: with gRPC 1.51's
// in-process transport an interceptor loses a server stream's last message.
void MarkInProcessCall(grpc::ClientContext& context);

// Applies ferry's server options (message limits, keepalive) to `builder`.
void ConfigureServerBuilder(grpc::ServerBuilder& builder);

// Adds a listening port for `address` with the process's server credentials
// (TLS when InstallRpcSecurity turned it on, plaintext otherwise). `*port`
// receives the bound port once the server is built (0 if binding failed).
// With TLS on but no --tls-cert/--tls-key (a client-only config) no port is
// added and `*port` stays 0: a server never falls back to plaintext.
void AddServingPort(grpc::ServerBuilder& builder, const std::string& address,
                    int* port);
// The same with an explicit security config instead of the process's.
void AddServingPort(grpc::ServerBuilder& builder, const std::string& address,
                    int* port, const RpcSecurityConfig& security);

}  // namespace ferry

#endif  // FERRY_PROTO_RPC_UTIL_H_

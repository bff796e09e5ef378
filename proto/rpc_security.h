// Transport security of every ferry gRPC port and channel: TLS, mutual TLS
// and a shared bearer token, configured once per process from OpsFlags
// (--tls-cert, --tls-key, --tls-ca, --require-client-cert,
// --auth-token-file).
//
//  - Channels (MakeChannel): TLS when the config has a CA or a certificate
//    (grpc::SslCredentials: the server is verified against --tls-ca, or the
//    system roots without one; with --tls-cert/--tls-key the client also
//    presents that pair, which mTLS servers require). The token travels as
//    `authorization: Bearer <token>` metadata on every call, added by a
//    client interceptor (call credentials would refuse insecure channels).
//  - Servers (AddServingPort): TLS with --tls-cert/--tls-key when TLS is on.
//    With --require-client-cert, clients must present a certificate signed
//    by --tls-ca (GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
//    without it no client certificate is asked for
//    (GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE), even when --tls-ca is set:
//    the CA then only verifies the servers this process calls. That keeps
//    one rule (mTLS on or off) instead of a "verify if offered" middle
//    ground that would reject a stray client certificate without requiring
//    one.
//  - Token: checked by the service adapters (proto/rpc_auth.h), not here.
//
// Thread safety: InstallRpcSecurity is called once at start, before any
// channel or server is made; ProcessRpcSecurity may be called from any
// thread afterwards. A config once installed is never freed, so references
// returned by ProcessRpcSecurity stay valid for the life of the process.
#ifndef FERRY_PROTO_RPC_SECURITY_H_
#define FERRY_PROTO_RPC_SECURITY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/ops_flags.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/client_interceptor.h"
#include "proto/rpc_roles.h"

namespace ferry {

// The loaded security settings: PEM contents (not paths) and the token.
// Default-constructed: plaintext, no token (ferry's default).
struct RpcSecurityConfig {
  std::string cert_pem;  // certificate chain presented by servers and clients
  std::string key_pem;   // its private key
  std::string ca_pem;    // CA bundle verifying peers
  bool require_client_cert = false;  // mutual TLS on served ports
  std::string token;  // bearer token; empty: none sent, none required
  // --role-tokens-file: the tokens accepted, by role. Non-empty: calls are
  // authorized per role (proto/rpc_roles.h) and `token` is only sent.
  RoleTokens role_tokens;
  // Name every server certificate is checked against instead of the host
  // dialled (for peers dialled by IP, e.g. ring workers by pod IP); empty:
  // the host dialled.
  std::string server_name;

  // TLS on for channels and served ports.
  bool tls() const { return !cert_pem.empty() || !ca_pem.empty(); }
  // This process can serve TLS (it has a certificate and its key).
  bool has_cert() const { return !cert_pem.empty() && !key_pem.empty(); }
};

// Reads and validates the files the flags name. INVALID_ARGUMENT, with a
// message naming the flag (and the path), when:
//  - a file is missing, unreadable or empty, or a PEM flag's file holds no
//    PEM block;
//  - --tls-cert is given without --tls-key, or the reverse;
//  - --require-client-cert is given without --tls-cert/--tls-key (no TLS to
//    serve) or without --tls-ca (nothing to verify clients with);
//  - the token file is empty once trailing whitespace (the newline) is
//    stripped, or the token holds a character outside visible ASCII
//    (0x21-0x7E: what an HTTP header value can carry, spaces excluded);
//  - the role tokens file is unreadable or malformed (ParseRoleTokens), or
//    names a client certificate (san:) without --require-client-cert.
absl::StatusOr<RpcSecurityConfig> LoadRpcSecurity(const OpsFlags& flags);

// LoadRpcSecurity, then makes the result the process's config, used by
// every later MakeChannel / AddServingPort and by every token check. Call
// once in main, before any channel or server is made. Errors as
// LoadRpcSecurity (the process's config is then left unchanged).
absl::Status InstallRpcSecurity(const OpsFlags& flags);

// The process's config (plaintext and no token until installed).
const RpcSecurityConfig& ProcessRpcSecurity();

// TEST ONLY: replaces the process's config, e.g. between tests that start
// servers with different settings in one process. Servers already started
// keep their transport credentials but check tokens against the new config.
void SetProcessRpcSecurityForTesting(RpcSecurityConfig config);

// The credentials of a channel under `config`: SslCredentials when
// config.tls() (CA as root certificates, the key/cert pair when present),
// insecure otherwise.
std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(
    const RpcSecurityConfig& config);

// The credentials of a served port under `config`: insecure without TLS,
// SslServerCredentials with TLS. Null when TLS is on but the config has no
// certificate and key (a client-only config): such a process cannot serve
// TLS, and never falls back to plaintext.
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(
    const RpcSecurityConfig& config);

// The client interceptors of a channel under `config`: one that adds the
// bearer token to every call when config.token is set, none otherwise.
std::vector<
    std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
MakeClientInterceptors(const RpcSecurityConfig& config);
// The metadata key of the in-process secret, and the secret: random hex
// drawn once per process, sent only on calls of MakeInProcessChannel's
// channels (MarkInProcessCall), which never leave the process, so a call
// that carries it is the process's own (gRPC 1.51's in-process transport
// names its peer "unknown", which a server cannot tell from others).
inline constexpr char kInProcessKey[] = "ferry-in-process";
const std::string& InProcessSecret();

// The metadata key and value prefix of the token (HTTP Authorization).
inline constexpr char kAuthorizationKey[] = "authorization";
inline constexpr char kBearerPrefix[] = "Bearer ";

}  // namespace ferry

#endif  // FERRY_PROTO_RPC_SECURITY_H_

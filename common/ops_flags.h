// Operational flags shared by every ferry process that serves or calls gRPC
// (ferry-server in both roles, ferry-worker in distributed mode, ferry
// local's children): health port, Prometheus port, logging, TLS and the
// bearer token. Plain values only; each concern loads and validates its own
// part (InstallRpcSecurity, StartMetricsExposer, ConfigureLogging,
// HealthServer) so that a bad value refuses the start with a clear message.
#ifndef FERRY_COMMON_OPS_FLAGS_H_
#define FERRY_COMMON_OPS_FLAGS_H_

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"

namespace ferry {

// health_port / metrics_port value: bind any free port (the kernel's
// choice), reported in ops_port_file. What a launcher or a test uses so
// that no port is picked first and bound later (where another process can
// take it in between).
inline constexpr int kAnyPort = -1;

struct OpsFlags {
  // Plaintext grpc.health.v1-only server on 0.0.0.0:health_port (0: none;
  // kAnyPort: a free port). Kubernetes gRPC probes cannot do TLS, so this
  // port stays plaintext when the service port uses TLS. Service "" is
  // readiness, "liveness" liveness.
  int health_port = 0;
  // Prometheus text exposition on 0.0.0.0:metrics_port/metrics (0: none;
  // kAnyPort: a free port).
  int metrics_port = 0;
  // Once both ports are bound, the file gets (atomically: temp file +
  // rename) the two lines "health PORT" and "metrics PORT", the ports bound
  // (0 for none). Empty: none.
  std::string ops_port_file;
  std::string log_level = "info";   // debug, info, warn or error
  std::string log_format = "text";  // text or json (one object per line)
  // PEM files. tls_cert + tls_key turn TLS on for every gRPC port this
  // process serves and every channel it opens; tls_ca verifies the peer
  // (and, with require_client_cert, the clients: mutual TLS).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
  bool require_client_cert = false;
  // Check every server certificate against this name instead of the host
  // dialled (ring peers are dialled by pod IP, which no certificate made in
  // advance can name).
  std::string tls_server_name;
  // A file holding the shared bearer token: sent on every call this process
  // makes and required on every call it serves (health excepted).
  std::string auth_token_file;
  // Per-role authorization (proto/rpc_roles.h): a file of "<role>
  // <sha256 of a token>" lines. Given, every call this process serves must
  // carry a listed token of a role allowed to make it; the token this
  // process sends stays --auth-token-file's.
  std::string role_tokens_file;

  bool tls_enabled() const { return !tls_cert.empty() || !tls_ca.empty(); }

  // The flags as command-line arguments (only those not at their default),
  // for launchers that pass them on to child processes (ferry local).
  std::vector<std::string> ToArgs() const;
};

// The ports of an ops port file (OpsFlags::ops_port_file); 0: none.
struct OpsPorts {
  int health = 0;
  int metrics = 0;
};
// The file's text: "health PORT\nmetrics PORT\n".
std::string FormatOpsPortFile(const OpsPorts& ports);
// DATA_LOSS when `text` is not what FormatOpsPortFile writes.
absl::StatusOr<OpsPorts> ParseOpsPortFile(const std::string& text);

// Adds --health-port, --metrics-port, --ops-port-file, --log-level,
// --log-format, --tls-cert,
// --tls-key, --tls-ca, --require-client-cert and --auth-token-file to `app`
// in the groups "Operations" and "Security".
void AddOpsFlags(CLI::App& app, OpsFlags& flags);

// The flags without the ports (logging and all security flags), for a
// launcher that passes them on to its children (ferry local).
void AddPassThroughOpsFlags(CLI::App& app, OpsFlags& flags);

// Only the client side of the security flags (--tls-ca, --tls-cert,
// --tls-key, --auth-token-file), for commands that call a server (ferry
// status, ferry health).
void AddClientSecurityFlags(CLI::App& app, OpsFlags& flags);

}  // namespace ferry

#endif  // FERRY_COMMON_OPS_FLAGS_H_

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

namespace ferry {

struct OpsFlags {
  // Plaintext grpc.health.v1-only server on 0.0.0.0:health_port (0: none).
  // Kubernetes gRPC probes cannot do TLS, so this port stays plaintext when
  // the service port uses TLS. Service "" is readiness, "liveness" liveness.
  int health_port = 0;
  // Prometheus text exposition on 0.0.0.0:metrics_port/metrics (0: none).
  int metrics_port = 0;
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

  bool tls_enabled() const { return !tls_cert.empty() || !tls_ca.empty(); }

  // The flags as command-line arguments (only those not at their default),
  // for launchers that pass them on to child processes (ferry local).
  std::vector<std::string> ToArgs() const;
};

// Adds --health-port, --metrics-port, --log-level, --log-format, --tls-cert,
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

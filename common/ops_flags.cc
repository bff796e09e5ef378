#include "common/ops_flags.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ferry {

std::string FormatOpsPortFile(const OpsPorts& ports) {
  return absl::StrCat("health ", ports.health, "\nmetrics ", ports.metrics,
                      "\n");
}

absl::StatusOr<OpsPorts> ParseOpsPortFile(const std::string& text) {
  OpsPorts ports;
  bool health = false, metrics = false;
  for (absl::string_view line :
       absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    const std::vector<absl::string_view> parts =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    int port = -1;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &port) || port < 0 ||
        port > 65535) {
      return absl::DataLossError(
          absl::StrCat("ops port file line '", line, "' is not NAME PORT"));
    }
    if (parts[0] == "health") {
      ports.health = port;
      health = true;
    } else if (parts[0] == "metrics") {
      ports.metrics = port;
      metrics = true;
    }
  }
  if (!health || !metrics) {
    return absl::DataLossError("ops port file without health and metrics");
  }
  return ports;
}

std::vector<std::string> OpsFlags::ToArgs() const {
  std::vector<std::string> args;
  auto add = [&args](const char* flag, const std::string& value) {
    if (value.empty()) return;
    args.push_back(flag);
    args.push_back(value);
  };
  if (health_port != 0) add("--health-port", std::to_string(health_port));
  if (metrics_port != 0) add("--metrics-port", std::to_string(metrics_port));
  add("--ops-port-file", ops_port_file);
  if (log_level != "info") add("--log-level", log_level);
  if (log_format != "text") add("--log-format", log_format);
  add("--tls-cert", tls_cert);
  add("--tls-key", tls_key);
  add("--tls-ca", tls_ca);
  add("--tls-server-name", tls_server_name);
  if (require_client_cert) args.push_back("--require-client-cert");
  add("--auth-token-file", auth_token_file);
  add("--role-tokens-file", role_tokens_file);
  return args;
}

void AddOpsFlags(CLI::App& app, OpsFlags& f) {
  const std::string ops = "Operations";
  app.add_option(
         "--health-port", f.health_port,
         "serve grpc.health.v1 in plaintext on this port too (for Kubernetes "
         "probes; service \"\" = ready, \"liveness\" = alive; 0: only on the "
         "service port; -1: a free port, see --ops-port-file)")
      ->capture_default_str()
      ->check(CLI::Range(kAnyPort, 65535))
      ->group(ops);
  app.add_option("--metrics-port", f.metrics_port,
                 "serve Prometheus metrics at http://0.0.0.0:PORT/metrics (0: "
                 "off; -1: a free port, see --ops-port-file)")
      ->capture_default_str()
      ->check(CLI::Range(kAnyPort, 65535))
      ->group(ops);
  app.add_option("--ops-port-file", f.ops_port_file,
                 "once bound, write \"health PORT\" and \"metrics PORT\" "
                 "(0: none) to this file, e.g. for --health-port -1")
      ->group(ops);
  AddPassThroughOpsFlags(app, f);
}

void AddPassThroughOpsFlags(CLI::App& app, OpsFlags& f) {
  const std::string ops = "Operations";
  app.add_option("--log-level", f.log_level, "debug, info, warn or error")
      ->capture_default_str()
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}))
      ->group(ops);
  app.add_option("--log-format", f.log_format,
                 "text (one line per event) or json (one object per line)")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}))
      ->group(ops);
  AddClientSecurityFlags(app, f);
  app.add_flag(
         "--require-client-cert", f.require_client_cert,
         "mutual TLS: refuse clients without a certificate signed by --tls-ca")
      ->group("Security");
}

void AddClientSecurityFlags(CLI::App& app, OpsFlags& f) {
  const std::string sec = "Security";
  app.add_option(
         "--tls-cert", f.tls_cert,
         "PEM certificate chain: serve and call every gRPC port over TLS (a "
         "client presents it for mutual TLS)")
      ->group(sec);
  app.add_option("--tls-key", f.tls_key, "PEM private key of --tls-cert")
      ->group(sec);
  app.add_option(
         "--tls-ca", f.tls_ca,
         "PEM CA bundle that verifies peers' certificates (servers and, with "
         "--require-client-cert, clients); alone, a client calls over TLS")
      ->group(sec);
  app.add_option("--tls-server-name", f.tls_server_name,
                 "check every server's certificate against this DNS name "
                 "instead of the "
                 "host dialled (e.g. ring peers dialled by pod IP)")
      ->group(sec);
  app.add_option("--auth-token-file", f.auth_token_file,
                 "file with a bearer token, sent on every call and (without "
                 "--role-tokens-file) required on every call served (health "
                 "excepted)")
      ->group(sec);
  app.add_option(
         "--role-tokens-file", f.role_tokens_file,
         "per-role authorization: lines \"<role> <sha256 of a token>\" "
         "(roles worker, shard, coordinator, operator); every call served "
         "must carry a listed token of a role that may make it "
         "(PERMISSION_DENIED otherwise; docs/operations.md has the table)")
      ->group(sec);
}

}  // namespace ferry

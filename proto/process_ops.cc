#include "proto/process_ops.h"

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/prometheus_metrics.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "proto/rpc_security.h"
#include "proto/rpc_util.h"

namespace ferry {
namespace {

// OpsFlags::ops_port_file: "health PORT" and "metrics PORT", written to a
// temp file and renamed, so a reader never sees half of it.
absl::Status WriteOpsPortFile(const std::string& path, int health,
                              int metrics) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << FormatOpsPortFile({health, metrics});
    if (!out) {
      return absl::UnavailableError(
          absl::StrCat("--ops-port-file: cannot write ", tmp));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(
        absl::StrCat("--ops-port-file: cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ProcessOps>> ProcessOps::Start(
    const OpsFlags& flags, const std::string& component, MetricRole role) {
  if (absl::Status s =
          ConfigureLogging(component, flags.log_level, flags.log_format);
      !s.ok()) {
    return s;
  }
  // Every ferry process serves gRPC (a worker its ring peer port), so a
  // CA without a certificate of its own cannot work: refuse it now rather
  // than when the first port is bound.
  if (!flags.tls_ca.empty() &&
      (flags.tls_cert.empty() || flags.tls_key.empty())) {
    return absl::InvalidArgumentError(
        "--tls-ca needs --tls-cert and --tls-key: this process serves gRPC "
        "too");
  }
  if (absl::Status s = InstallRpcSecurity(flags); !s.ok()) return s;
  std::unique_ptr<ProcessOps> ops(new ProcessOps());
  EnableHealthChecks();
  // The health port first: it serves health alone, without reflection.
  if (flags.health_port != 0) {
    auto server = HealthServer::Start(
        flags.health_port == kAnyPort ? 0 : flags.health_port, &ops->health_);
    if (!server.ok()) return server.status();
    ops->health_server_ = std::move(*server);
  }
  // Every server the process builds from now on offers reflection (grpcurl).
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  ExportOnlyRole(role);
  auto metrics = flags.metrics_port == kAnyPort
                     ? StartMetricsExposerAt("0.0.0.0:0")
                     : StartMetricsExposer(flags.metrics_port);
  if (!metrics.ok()) return metrics.status();
  ops->metrics_ = std::move(*metrics);
  if (!flags.ops_port_file.empty()) {
    if (absl::Status s = WriteOpsPortFile(
            flags.ops_port_file, ops->health_port(), ops->metrics_port());
        !s.ok()) {
      return s;
    }
  }
  return ops;
}

ProcessOps::~ProcessOps() {
  stop_.Notify();
  if (watcher_.joinable()) watcher_.join();
  health_server_.reset();
  metrics_.reset();
}

void ProcessOps::WatchPeer(const std::string& name, const std::string& address,
                           absl::Duration interval, int misses) {
  watcher_ = std::thread([this, name, address, interval, misses] {
    std::shared_ptr<grpc::Channel> channel = MakeChannel(address);
    int missed = 0;
    bool reachable = true;
    do {
      if (drain_flag_ != nullptr && drain_flag_->load()) {
        health_.SetDraining();
        return;
      }
      std::string error;
      const HealthStatus status = CheckHealth(
          channel, "", std::min(interval, absl::Seconds(2)), &error);
      // NOT_SERVING (e.g. still starting) still proves the peer is reachable.
      const bool answered = status != HealthStatus::kUnreachable;
      missed = answered ? 0 : missed + 1;
      if (answered && !reachable) {
        reachable = true;
        health_.SetPeersReachable(true);
        LogInfo("peer reachable again", {{"peer", name}, {"address", address}});
      } else if (!answered && reachable && missed >= misses) {
        reachable = false;
        health_.SetPeersReachable(false, name + " unreachable");
        LogWarn("peer unreachable: not ready",
                {{"peer", name}, {"address", address}, {"error", error}});
      }
    } while (!stop_.WaitForNotificationWithTimeout(interval));
  });
}

int ProcessOps::health_port() const {
  return health_server_ == nullptr ? 0 : health_server_->port();
}

int ProcessOps::metrics_port() const {
  return metrics_ == nullptr ? 0 : metrics_->port();
}

}  // namespace ferry

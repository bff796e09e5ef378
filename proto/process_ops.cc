#include "proto/process_ops.h"

#include "common/log.h"
#include "common/prometheus_metrics.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "proto/rpc_security.h"
#include "proto/rpc_util.h"

namespace ferry {

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
    auto server = HealthServer::Start(flags.health_port, &ops->health_);
    if (!server.ok()) return server.status();
    ops->health_server_ = std::move(*server);
  }
  // Every server the process builds from now on offers reflection (grpcurl).
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  ExportOnlyRole(role);
  auto metrics = StartMetricsExposer(flags.metrics_port);
  if (!metrics.ok()) return metrics.status();
  ops->metrics_ = std::move(*metrics);
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

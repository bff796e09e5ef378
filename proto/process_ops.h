// The operational side of a ferry process, set up once in main() from
// OpsFlags: structured logging, RPC security (TLS, bearer token), the
// grpc.health.v1 state with its optional plaintext health port, readiness
// that follows a peer's reachability, and the Prometheus exposer.
#ifndef FERRY_PROTO_PROCESS_OPS_H_
#define FERRY_PROTO_PROCESS_OPS_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/ops_flags.h"
#include "common/prometheus_metrics.h"
#include "proto/health.h"

namespace ferry {

class ProcessOps {
 public:
  // In this order: logging as `component`, RPC security, health checks on
  // (readiness NOT_SERVING until SetStarted), the health port, the metrics
  // port, then the ops port file (OpsFlags::ops_port_file). INVALID_ARGUMENT
  // for bad flags, UNAVAILABLE for a port that cannot be bound or a port
  // file that cannot be written; nothing is left running on error.
  // `role` selects the metric series this process exports (ExportOnlyRole).
  static absl::StatusOr<std::unique_ptr<ProcessOps>> Start(
      const OpsFlags& flags, const std::string& component, MetricRole role);
  ~ProcessOps();  // stops the peer watcher, then the health and metrics ports

  HealthState& health() { return health_; }

  // From now on readiness also requires `address` to answer a health check
  // (service "", over a channel with the process's security) at least once
  // in `misses` consecutive probes taken every `interval`. Call at most once.
  void WatchPeer(const std::string& name, const std::string& address,
                 absl::Duration interval = absl::Seconds(2), int misses = 3);

  // The peer watcher also turns readiness and liveness off (draining) once
  // `*flag` is set (e.g. by a SIGTERM handler, which cannot call into
  // HealthState itself). Call before WatchPeer; `flag` must outlive this.
  void DrainWhen(const std::atomic<bool>* flag) { drain_flag_ = flag; }

  int health_port() const;   // 0 when none
  int metrics_port() const;  // 0 when none

 private:
  ProcessOps() = default;
  HealthState health_;
  std::unique_ptr<HealthServer> health_server_;
  std::unique_ptr<MetricsExposer> metrics_;
  const std::atomic<bool>* drain_flag_ = nullptr;
  absl::Notification stop_;
  std::thread watcher_;
};

}  // namespace ferry

#endif  // FERRY_PROTO_PROCESS_OPS_H_

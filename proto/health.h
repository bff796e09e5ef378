// grpc.health.v1 for ferry's processes: one HealthState per process whose
// readiness and liveness are mirrored into the default health service of
// every gRPC server the process runs (its service port and, optionally, a
// plaintext health-only port for Kubernetes probes, which cannot do TLS),
// plus a client that checks a server's health without generated stubs.
//
// Health service names:
//   ""          readiness: SERVING when started, not draining and every
//               watched peer is reachable; NOT_SERVING otherwise.
//   "liveness"  SERVING from the process start until it drains (never
//               follows peers, so an unreachable coordinator does not get a
//               pod restarted).
//   the ferry service a server hosts (e.g. "ferry.v1.Coordinator"): as "".
// The health service answers without a bearer token.
#ifndef FERRY_PROTO_HEALTH_H_
#define FERRY_PROTO_HEALTH_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"

namespace ferry {

inline constexpr char kLivenessService[] = "liveness";

// Thread-safe.
class HealthState {
 public:
  // Mirrors the state into `server`'s default health service (the server
  // must have been built after grpc::EnableDefaultHealthCheckService(true);
  // EnableHealthChecks() does that). `services` are the ferry services it
  // hosts, which follow readiness. The server must outlive the attachment:
  // Detach it before shutting it down.
  void Attach(grpc::Server* server, std::vector<std::string> services = {});
  void Detach(grpc::Server* server);

  // Readiness = started && !draining && peers_ok.
  void SetStarted();
  void SetDraining();  // also ends liveness; irreversible
  void SetPeersReachable(bool ok, const std::string& reason = "");

  bool ready() const;
  bool live() const;
  std::string reason() const;  // why not ready ("" when ready)

 private:
  struct Attached {
    grpc::Server* server;
    std::vector<std::string> services;
  };
  void PublishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool peers_ok_ ABSL_GUARDED_BY(mu_) = true;
  std::string peer_reason_ ABSL_GUARDED_BY(mu_);
  std::vector<Attached> attached_ ABSL_GUARDED_BY(mu_);
};

// Turns on the default health service for servers built from now on.
void EnableHealthChecks();

// A plaintext server with only the health service on 0.0.0.0:port (port 0:
// any free port), attached to `state`. UNAVAILABLE if the port cannot be
// bound. Detach and shut down via the returned object's destructor.
class HealthServer {
 public:
  static absl::StatusOr<std::unique_ptr<HealthServer>> Start(
      int port, HealthState* state, const std::string& host = "0.0.0.0");
  ~HealthServer();
  int port() const { return port_; }

 private:
  HealthServer(HealthState* state) : state_(state) {}
  HealthState* state_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

enum class HealthStatus {
  kServing,
  kNotServing,
  kServiceUnknown,
  kUnreachable
};
const char* HealthStatusName(HealthStatus status);

// grpc.health.v1.Health/Check of `service` over `channel`, with a deadline.
// kUnreachable carries the call's error in `*error` when given.
HealthStatus CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                         const std::string& service, absl::Duration timeout,
                         std::string* error = nullptr);

}  // namespace ferry

#endif  // FERRY_PROTO_HEALTH_H_

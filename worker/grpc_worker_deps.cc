#include "worker/grpc_worker_deps.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "coordinator/coordinator_client.h"
#include "proto/health.h"
#include "ring/grpc_ring_transport.h"
#include "ring/ring_peer_service.h"
#include "worker/job_options.h"

namespace ferry {
namespace {

// The RingPeer server and the link shaper of the process. Declaration
// order: the shaper outlives the server, whose held messages it may still
// release.
class GrpcPeerEndpoint final : public PeerEndpoint {
 public:
  // `shared_shaper` (not owned; null: none) is used when `shaper` is null.
  GrpcPeerEndpoint(std::unique_ptr<LinkShaper> shaper,
                   LinkShaper* shared_shaper, HealthState* health,
                   std::string address, bool shared_memory)
      : owned_shaper_(std::move(shaper)),
        shaper_(owned_shaper_ != nullptr ? owned_shaper_.get() : shared_shaper),
        shared_memory_(shared_memory),
        health_(health),
        address_(std::move(address)) {}
  ~GrpcPeerEndpoint() override {
    if (health_ != nullptr && server_ != nullptr) {
      health_->Detach(server_->server.get());
    }
  }

  absl::Status Start(const std::string& listen, const std::string& advertise) {
    ASSIGN_OR_RETURN(server_, StartRingPeerServer(listen, shaper_));
    if (health_ != nullptr) {
      health_->Attach(server_->server.get(), {"ferry.v1.RingPeer"});
    }
    address_ = AdvertisedPeerAddress(listen, advertise, server_->port);
    return absl::OkStatus();
  }
  LinkShaper* shaper() const { return shaper_; }

  std::string address() const override { return address_; }
  void SetJob(const std::string& job_id) override {
    server_->service->set_job_id(job_id);
  }
  absl::StatusOr<std::unique_ptr<RingTransport>> Connect(
      const std::string& job_id, const v1::NextTaskResponse& lease) override {
    GrpcRingTransportOptions options;
    options.job_id = job_id;
    options.generation = lease.ring_generation();
    options.rank = lease.rank();
    for (const v1::RingMember& m : lease.ring()) {
      options.ring.push_back({m.worker_id(), m.peer_address()});
    }
    options.mailbox = server_->mailbox.get();
    options.counter = server_->counter.get();
    options.shaper = server_->shaper;  // link emulation, if any
    options.shared_memory = shared_memory_;
    ASSIGN_OR_RETURN(std::unique_ptr<GrpcRingTransport> transport,
                     GrpcRingTransport::Create(std::move(options)));
    return std::unique_ptr<RingTransport>(std::move(transport));
  }
  WeightsPublisher* publisher() override { return server_->publisher.get(); }
  const ByteCounter* counter() const override { return server_->counter.get(); }
  LinkShaperStats link_stats() const override {
    return shaper_ == nullptr ? LinkShaperStats{} : shaper_->stats();
  }

 private:
  std::unique_ptr<LinkShaper> owned_shaper_;
  LinkShaper* const shaper_;  // owned_shaper_, a shared one, or null
  const bool shared_memory_;  // offer ring links (WorkerOptions)
  HealthState* const health_;
  std::string address_;
  std::unique_ptr<RingPeerServer> server_;
};

}  // namespace

absl::StatusOr<WorkerDeps> MakeGrpcWorkerDeps(
    const WorkerOptions& options, std::map<int, InProcessShard> hosted_shards,
    LinkShaper* host_link) {
  std::unique_ptr<LinkShaper> shaper;
  if (options.link.enabled() && host_link == nullptr) {
    shaper = std::make_unique<LinkShaper>(options.link);
    LogInfo(absl::StrCat("link emulation: ", options.link.ToString(),
                         " per direction, burst ", shaper->burst_bytes(),
                         " bytes"));
  }
  auto peer = std::make_unique<GrpcPeerEndpoint>(std::move(shaper), host_link,
                                                 options.health, "",
                                                 options.ring_shared_memory);
  RETURN_IF_ERROR(
      peer->Start(options.peer_listen_address, options.peer_advertise_address));
  LinkShaper* const link_shaper = peer->shaper();

  WorkerDeps deps;
  deps.peer = std::move(peer);
  CoordinatorClientOptions copts;
  copts.rpc_timeout = options.rpc_timeout;
  copts.short_timeout = std::min(options.rpc_timeout, absl::Seconds(5));
  copts.retry = options.retry;
  copts.cancel = options.stop_requested;
  deps.coordinator =
      CoordinatorClient::Connect(options.coordinator_address, copts);
  const absl::Duration rpc_timeout = options.rpc_timeout;
  const RetryPolicy retry = options.retry;
  deps.parameter_client = [rpc_timeout, retry, link_shaper,
                           hosted_shards = std::move(hosted_shards)](
                              const v1::JobSpec& job,
                              const std::string& worker_id,
                              const ParameterLayout& layout)
      -> absl::StatusOr<std::unique_ptr<ParameterClient>> {
    ASSIGN_OR_RETURN(GrpcParameterClientOptions popts,
                     ParameterClientOptionsForJob(job, worker_id, layout));
    popts.rpc_timeout = rpc_timeout;
    popts.retry = retry;
    popts.shaper = link_shaper;
    popts.in_process_shards = hosted_shards;
    ASSIGN_OR_RETURN(std::unique_ptr<GrpcParameterClient> client,
                     GrpcParameterClient::Create(std::move(popts)));
    return std::unique_ptr<ParameterClient>(std::move(client));
  };
  deps.clock = RealClock();
  return deps;
}

void AddRingSharedMemoryFlag(CLI::App& app, WorkerOptions& options) {
  app.add_option("--ring-shared-memory", options.ring_shared_memory,
                 "ring mode: exchange with a neighbour on this host through "
                 "shared memory (/dev/shm) instead of a loopback stream; "
                 "never with --link-bandwidth/--link-latency")
      ->capture_default_str();
}

}  // namespace ferry

// The gRPC wiring of a distributed worker (ferry-worker's main): the RingPeer
// server as the PeerEndpoint (with the process's link shaper), the
// CoordinatorClient and a GrpcParameterClient factory, all configured from
// WorkerOptions.
#ifndef FERRY_WORKER_GRPC_WORKER_DEPS_H_
#define FERRY_WORKER_GRPC_WORKER_DEPS_H_

#include <map>
#include <memory>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "worker/distributed_worker.h"
#include "worker/worker_deps.h"

namespace ferry {

// Starts the peer service on options.peer_listen_address (attached to
// options.health when set) and connects the coordinator client lazily.
// `options` must outlive the deps (the stop flag and health are read
// later). `hosted_shards`: the shards this process serves (by shard id), which
// the PS client calls in the process; `host_link` (not
// owned, outlives the deps): their link shaper, which the worker's traffic
// then shares (one emulated link per host) instead of a shaper of its own
// from options.link. UNAVAILABLE when the peer service cannot listen.
absl::StatusOr<WorkerDeps> MakeGrpcWorkerDeps(
    const WorkerOptions& options,
    std::map<int, InProcessShard> hosted_shards = {},
    LinkShaper* host_link = nullptr);

// --ring-shared-memory into options.ring_shared_memory: ferry-worker's
// flag, and FERRY_RING_SHARED_MEMORY for a ferry.torch worker.
void AddRingSharedMemoryFlag(CLI::App& app, WorkerOptions& options);

}  // namespace ferry

#endif  // FERRY_WORKER_GRPC_WORKER_DEPS_H_

// The gRPC wiring of a distributed worker (ferry-worker's main): the RingPeer
// server as the PeerEndpoint (with the process's link shaper), the
// CoordinatorClient and a GrpcParameterClient factory, all configured from
// WorkerOptions.
#ifndef FERRY_WORKER_GRPC_WORKER_DEPS_H_
#define FERRY_WORKER_GRPC_WORKER_DEPS_H_

#include "absl/status/statusor.h"
#include "worker/distributed_worker.h"
#include "worker/worker_deps.h"

namespace ferry {

// Starts the peer service on options.peer_listen_address (attached to
// options.health when set) and connects the coordinator client lazily.
// `options` must outlive the deps (the stop flag and health are read
// later). UNAVAILABLE when the peer service cannot listen.
absl::StatusOr<WorkerDeps> MakeGrpcWorkerDeps(const WorkerOptions& options);

}  // namespace ferry

#endif  // FERRY_WORKER_GRPC_WORKER_DEPS_H_

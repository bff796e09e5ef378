// What the distributed worker (worker/distributed_worker.h) takes from the
// outside world, so that tests run its training loop with in-memory
// coordinators, parameter clients and ring transports while ferry-worker
// wires the gRPC ones (worker/grpc_worker_deps.h).
#ifndef FERRY_WORKER_WORKER_DEPS_H_
#define FERRY_WORKER_WORKER_DEPS_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/byte_counter.h"
#include "common/clock.h"
#include "common/link_shaper.h"
#include "coordinator/coordinator_api.h"
#include "ferry/v1/coordinator.pb.h"
#include "model/parameter_layout.h"
#include "ps/ps_client.h"
#include "ring/ring_transport.h"
#include "ring/weights_publisher.h"

namespace ferry {

// This worker's endpoint for the other workers: in ferry-worker the RingPeer
// gRPC server (with the process's link shaper), in tests a hub of in-memory
// transports. It exists in every mode (the address is registered before
// the mode is known); only ring jobs use its links.
//
// Thread safety: all methods are thread-safe.
class PeerEndpoint {
 public:
  virtual ~PeerEndpoint() = default;

  // HOST:PORT other workers reach this one at (sent at Register).
  virtual std::string address() const = 0;
  // The job this worker joined; calls of other jobs are refused from now.
  virtual void SetJob(const std::string& job_id) = 0;
  // Opens this worker's links of the ring `lease` names (ring_generation,
  // rank, members in rank order) for `job_id`; called once per ring
  // generation. INVALID_ARGUMENT for a ring it cannot connect; others as the
  // transport's.
  virtual absl::StatusOr<std::unique_ptr<RingTransport>> Connect(
      const std::string& job_id, const v1::NextTaskResponse& lease) = 0;
  // Where the weights go when a reader asks for them; null: nobody reads.
  virtual WeightsPublisher* publisher() = 0;
  // Bytes exchanged with other workers; null: not counted.
  virtual const ByteCounter* counter() const = 0;
  // What link emulation delayed (zero without it).
  virtual LinkShaperStats link_stats() const { return {}; }
};

// Builds the client of a PS job's shards for `worker_id`, placed by
// `layout` (the chunks of ParameterClientOptionsForJob). Errors: the
// placement's and the client's (INVALID_ARGUMENT, RESOURCE_EXHAUSTED).
using ParameterClientFactory =
    std::function<absl::StatusOr<std::unique_ptr<ParameterClient>>(
        const v1::JobSpec& job, const std::string& worker_id,
        const ParameterLayout& layout)>;

// Ownership: the worker takes the deps; `peer` is destroyed after
// everything built from the others (a link shaper it owns outlives the
// clients that use it).
struct WorkerDeps {
  std::unique_ptr<PeerEndpoint> peer;           // required
  std::unique_ptr<CoordinatorApi> coordinator;  // required
  ParameterClientFactory parameter_client;      // required for PS jobs
  Clock* clock = RealClock();                   // not owned; never null
};

}  // namespace ferry

#endif  // FERRY_WORKER_WORKER_DEPS_H_

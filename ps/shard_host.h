// ShardHost: the PS shards one process serves for a job (its partitions):
// each created from the job, resumed from its newest checkpoint (or started
// from the job's --init-from rows, with version 0 written), served over
// gRPC, with its gauges on /metrics and its server attached to the
// process's health. `ferry-server ps` runs one; so does a worker that hosts
// its shard (a colocated shard, docs/architecture.md), whose own PS client
// reaches it through InProcess.
//
// Shutdown order (Stop): every partition freezes and writes its last
// checkpoint (later pushes and finalizes answer UNAVAILABLE, so nothing is
// applied after it), then the servers stop with a grace for calls in flight.
//
// Thread safety: Start, Stop and the destructor from one thread; the
// accessors from any once Start returned.
#ifndef FERRY_PS_SHARD_HOST_H_
#define FERRY_PS_SHARD_HOST_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/link_shaper.h"
#include "common/peer_limits.h"
#include "common/prometheus_metrics.h"
#include "ferry/v1/common.pb.h"
#include "grpcpp/grpcpp.h"
#include "ps/ps_client.h"

namespace ferry {

class HealthState;
struct ShardPartition;

// Elements [begin, end) of the starting flat buffer of a job whose model
// its first worker defined (JobSpec.model_from_worker): the coordinator's.
using ModelValuesSource = std::function<absl::StatusOr<std::vector<float>>(
    int64_t begin, int64_t end)>;

struct ShardHostOptions {
  // The process's index among the job's shard processes.
  int process_id = 0;
  // One address per partition ("host:port", port 0: any free one); the
  // job's shard addresses are shard processes x partitions
  // (common/shard_partitions.h).
  std::vector<std::string> listen;
  // One partition: its checkpoints' directory; several: a subdirectory
  // shard-<logical id> each. Empty: no checkpoints.
  std::string checkpoint_dir;
  PsLimits limits;
  // Link emulation of the shards' pushes and pulls (null: none; not owned,
  // outlives the host). In-process calls bypass it.
  LinkShaper* shaper = nullptr;
  // Needed when the job's model is a worker's (else unused).
  ModelValuesSource model_values;
  // The process's health (null: none): the servers are attached to it with
  // ferry.v1.ParameterServer and detached before they stop.
  HealthState* health = nullptr;
};

class ShardHost {
 public:
  // Starts serving. INVALID_ARGUMENT for a process id or partition count
  // the job does not have, a configuration the shard refuses, or
  // --init-from rows that do not fit the job; UNAVAILABLE when an address
  // cannot be bound or a checkpoint cannot be read or written.
  static absl::StatusOr<std::unique_ptr<ShardHost>> Start(
      const v1::JobSpec& job, ShardHostOptions options);
  ShardHost(const ShardHost&) = delete;
  ShardHost& operator=(const ShardHost&) = delete;
  ~ShardHost();  // Stop(), when it was not called

  int partitions() const { return static_cast<int>(partitions_.size()); }
  // The bound ports and the logical shard ids, in partition order.
  std::vector<int> ports() const;
  std::vector<int> logical_ids() const;
  // Flat elements served (the partitions' ranges together).
  int64_t parameters() const;
  // The first partition's version.
  int64_t version() const;

  // Partition `i` for this process's own PS client: the shard, called
  // directly, and a channel to its server over gRPC's in-process transport
  // (proto/rpc_util.h MakeInProcessChannel; calls marked with
  // MarkInProcessCall): no socket, no link emulation. The channel is not
  // to be used once Stop ran; the shard answers UNAVAILABLE then, until
  // the host is destroyed.
  InProcessShard InProcess(int i) const;

  // Freezes and checkpoints every partition, then stops the servers
  // (`grace` for calls in flight) and logs each partition's totals. OK, or
  // the first checkpoint error (every partition is still stopped).
  // Idempotent: later calls return OK.
  absl::Status Stop(absl::Duration grace = absl::Seconds(2));

 private:
  explicit ShardHost(ShardHostOptions options);
  void DetachHealth();

  ShardHostOptions options_;
  std::vector<std::unique_ptr<ShardPartition>> partitions_;
  // Declared after the partitions, so destroyed before them.
  std::unique_ptr<ScrapeHook> gauges_;
  bool stopped_ = false;
};

}  // namespace ferry

#endif  // FERRY_PS_SHARD_HOST_H_

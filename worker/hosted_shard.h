// A worker process that also serves PS shards (colocated shards, as in
// BytePS's and ps-lite's colocated mode): `ferry-worker --host-shard N`
// serves shard process N of the job (its partitions) in the worker's
// process (a ferry.torch worker: FERRY_HOST_SHARD=N, worker/hosted_worker.h),
// and the worker's PS client reaches those shards over gRPC's in-process
// transport. Other workers reach them over the network as any shard. The shards
// outlive the worker's training: the process serves them until SIGTERM/SIGINT,
// then writes their last checkpoint (ShardHost::Stop).
//
// Failure behaviour: the process is a shard process. When it dies, its
// shards come back where it is restarted (same addresses and checkpoint
// directory: `ferry local` restarts it like a shard) and the coordinator
// rolls the job back to their checkpoint as for any lost shard; its
// worker's lease is handed out again as for any lost worker.
#ifndef FERRY_WORKER_HOSTED_SHARD_H_
#define FERRY_WORKER_HOSTED_SHARD_H_

#include <map>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "common/link_shaper.h"
#include "common/peer_limits.h"
#include "ps/shard_host.h"
#include "worker/distributed_worker.h"

namespace ferry {

struct HostedShardFlags {
  int process_id = -1;  // -1: the worker hosts no shard
  // --host-shard-from-hostname: process_id is the StatefulSet ordinal of
  // the pod's name (ResolveHostedShardFlags sets it).
  bool from_hostname = false;
  std::string listen;  // the partitions' addresses (PartitionListenAddresses)
  int partitions = 1;
  std::string checkpoint_dir;

  bool enabled() const { return process_id >= 0; }
};

// Adds --host-shard, --host-shard-from-hostname, --shard-listen,
// --shard-partitions and --shard-checkpoint-dir to `app`, bound to `flags`
// (which must outlive the parse).
void AddHostedShardFlags(CLI::App& app, HostedShardFlags& flags);

// After the parse: with from_hostname, process_id becomes the ordinal at the
// end of `pod_name` (common/pod_name.h). INVALID_ARGUMENT, naming the flag,
// for a name without one or for both --host-shard and
// --host-shard-from-hostname.
absl::Status ResolveHostedShardFlags(HostedShardFlags& flags,
                                     const std::string& pod_name);

// The shards a worker hosts, with what it needs to keep them: the process's
// link shaper (one emulated link per host, shared by the shards and the
// worker's own traffic; declared first, so it outlives the servers that use
// it) and the host.
struct HostedShards {
  std::unique_ptr<LinkShaper> shaper;
  std::unique_ptr<ShardHost> host;

  // The hosted shards by logical shard id, for the worker's PS client
  // (GrpcParameterClientOptions::in_process_shards).
  std::map<int, InProcessShard> Shards() const;
};

// Fetches the job from options.coordinator_address (retried by
// options.retry) and starts serving the hosted shards, attached to
// options.health. A job whose model its first worker defines
// (JobSpec.model_from_worker: a ferry.torch worker hosting the shard) loads
// its starting values from the coordinator, FAILED_PRECONDITION before the
// model is defined. INVALID_ARGUMENT for flags that do not fit the job (not
// a PS job, a shard process it does not have, a listen list of another
// length); the shard host's errors otherwise.
absl::StatusOr<HostedShards> StartHostedShards(const HostedShardFlags& flags,
                                               const WorkerOptions& options);

}  // namespace ferry

#endif  // FERRY_WORKER_HOSTED_SHARD_H_

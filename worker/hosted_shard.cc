#include "worker/hosted_shard.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/pod_name.h"
#include "common/prometheus_metrics.h"
#include "common/shard_partitions.h"
#include "common/status_macros.h"
#include "coordinator/coordinator_client.h"

namespace ferry {

void AddHostedShardFlags(CLI::App& app, HostedShardFlags& flags) {
  app.add_option("--host-shard", flags.process_id,
                 "distributed PS mode: also serve shard process N of the job "
                 "in this process (colocated shard; its own pushes and pulls "
                 "stay in the process); the process then serves it until "
                 "SIGTERM, also after training ends (-1: none)")
      ->capture_default_str()
      ->check(CLI::Range(-1, 1 << 20));
  app.add_flag("--host-shard-from-hostname", flags.from_hostname,
               "as --host-shard N, N from the -N at the end of $HOSTNAME (a "
               "StatefulSet pod such as ferry-ps-1: "
               "deploy/k8s/components/colocated-shards)");
  app.add_option("--shard-listen", flags.listen,
                 "with --host-shard: HOST:PORT of each partition, "
                 "comma-separated, or one HOST:PORT whose port P gives P, "
                 "P+1, ... (the addresses the coordinator's --shards names)");
  app.add_option("--shard-partitions", flags.partitions,
                 "with --host-shard: logical shards this process serves")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--shard-checkpoint-dir", flags.checkpoint_dir,
                 "with --host-shard: the shard's checkpoint directory (resumed "
                 "at start, written at SIGTERM; empty: none)");
}

absl::Status ResolveHostedShardFlags(HostedShardFlags& flags,
                                     const std::string& pod_name) {
  if (!flags.from_hostname) return absl::OkStatus();
  if (flags.process_id >= 0) {
    return absl::InvalidArgumentError(
        "--host-shard and --host-shard-from-hostname exclude each other");
  }
  absl::StatusOr<int> ordinal = StatefulSetOrdinal(pod_name);
  if (!ordinal.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--host-shard-from-hostname: ", ordinal.status().message()));
  }
  flags.process_id = *ordinal;
  return absl::OkStatus();
}

std::map<int, InProcessShard> HostedShards::Shards() const {
  std::map<int, InProcessShard> shards;
  const std::vector<int> ids = host->logical_ids();
  for (int i = 0; i < host->partitions(); ++i) {
    shards[ids[i]] = host->InProcess(i);
  }
  return shards;
}

absl::StatusOr<HostedShards> StartHostedShards(const HostedShardFlags& flags,
                                               const WorkerOptions& options) {
  if (flags.listen.empty()) {
    return absl::InvalidArgumentError(
        "--host-shard needs --shard-listen HOST:PORT (the address the "
        "coordinator's --shards names for it)");
  }
  ASSIGN_OR_RETURN(std::vector<std::string> listen,
                   PartitionListenAddresses(flags.listen, flags.partitions));
  CoordinatorClientOptions copts;
  copts.retry = options.retry;
  copts.cancel = options.stop_requested;
  std::unique_ptr<CoordinatorClient> coordinator =
      CoordinatorClient::Connect(options.coordinator_address, copts);
  ASSIGN_OR_RETURN(const v1::JobSpec job, coordinator->GetJob());
  if (job.shard_addresses_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--host-shard: job ", job.job_id(),
                     " has no PS shards (it runs in ring mode)"));
  }
  if (job.model_from_worker() && job.tensors().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--host-shard: job ", job.job_id(),
        " takes its model from its first worker, which has not defined it "
        "yet (a ferry.torch worker defines it before it hosts a shard)"));
  }
  HostedShards hosted;
  if (options.link.enabled()) {
    hosted.shaper = std::make_unique<LinkShaper>(options.link);
  }
  ShardHostOptions so;
  so.process_id = flags.process_id;
  so.listen = std::move(listen);
  so.checkpoint_dir = flags.checkpoint_dir;
  so.shaper = hosted.shaper.get();
  so.health = options.health;
  if (job.model_from_worker()) {
    so.model_values =
        CoordinatorModelValues(options.coordinator_address, job.job_id());
  }
  ASSIGN_OR_RETURN(hosted.host, ShardHost::Start(job, std::move(so)));
  // The process's /metrics shows its shard's series beside its worker's.
  AlsoExportRole(MetricRole::kPs);
  LogInfo(
      "hosting PS shards in the worker's process",
      {{"shard", flags.process_id},
       {"logical_shards", absl::StrJoin(hosted.host->logical_ids(), ",")},
       {"ports", absl::StrJoin(hosted.host->ports(), ",")},
       {"parameters", hosted.host->parameters()},
       {"version", hosted.host->version()},
       {"checkpoints", flags.checkpoint_dir.empty() ? std::string("off")
                                                    : flags.checkpoint_dir}});
  return hosted;
}

}  // namespace ferry

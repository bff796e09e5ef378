#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/backoff.h"
#include "common/exit_codes.h"
#include "common/link_shaper.h"
#include "common/log.h"
#include "common/pod_name.h"
#include "common/shard_partitions.h"
#include "common/shutdown_signal.h"
#include "coordinator/coordinator_client.h"
#include "ferry/v1/coordinator.grpc.pb.h"
#include "proto/process_ops.h"
#include "proto/rpc_util.h"
#include "ps/shard_host.h"
#include "server/server_main.h"

namespace ferry {
namespace {

// Logs why the shard cannot run; kExitConfig for INVALID_ARGUMENT.
int FailShard(const absl::Status& status) {
  LogError("cannot run the PS shard", {{"error", status}});
  return StartupExitCode(status);
}

// Fetches the job from the coordinator, retrying while it is unreachable.
absl::StatusOr<v1::JobSpec> FetchJob(const std::string& address,
                                     absl::Duration timeout) {
  auto stub = v1::Coordinator::NewStub(MakeChannel(address));
  Backoff backoff(RetryPolicy{.initial_backoff = absl::Milliseconds(200),
                              .max_backoff = absl::Seconds(2),
                              .budget = timeout});
  while (true) {
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(2));
    v1::JobSpec job;
    const grpc::Status status =
        stub->GetJob(&context, v1::GetJobRequest(), &job);
    if (status.ok()) return job;
    const bool retryable =
        status.error_code() == grpc::StatusCode::UNAVAILABLE ||
        status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (!retryable || !backoff.Wait()) {
      return absl::Status(
          FromGrpcStatus(status).code(),
          absl::StrCat("cannot fetch the job from the coordinator at ", address,
                       ": ", status.error_message()));
    }
  }
}

}  // namespace

absl::StatusOr<int> ShardIdFromHostname(const std::string& hostname) {
  absl::StatusOr<int> ordinal = StatefulSetOrdinal(hostname);
  if (!ordinal.ok()) {
    return absl::Status(
        ordinal.status().code(),
        absl::StrCat("--shard-id-from-hostname: ", ordinal.status().message()));
  }
  return ordinal;
}

int RunPsShard(const PsFlags& f, ProcessOps& ops) {
  if (f.coordinator.empty()) {
    LogError("--coordinator HOST:PORT is required");
    return kExitConfig;
  }
  auto link = ParseLinkLimit(f.link_bandwidth, f.link_latency);
  if (!link.ok()) {
    LogError(link.status().message());
    return kExitConfig;
  }
  auto listens = PartitionListenAddresses(f.listen, f.partitions);
  if (!listens.ok()) return FailShard(listens.status());
  // Declared before the servers, which use it, so that it outlives them.
  // One link for the whole process, whatever its partitions.
  std::unique_ptr<LinkShaper> shaper;
  if (link->enabled()) {
    shaper = std::make_unique<LinkShaper>(*link);
    LogInfo("link emulation", {{"shard", f.shard_id},
                               {"per_direction", link->ToString()},
                               {"burst_bytes", shaper->burst_bytes()}});
  }
  auto job = FetchJob(f.coordinator, absl::Seconds(f.connect_timeout_s));
  // A job whose model comes from its first worker: its tensors once that
  // worker defined them.
  for (bool logged = false;
       job.ok() && job->model_from_worker() && job->tensors().empty();) {
    if (!logged) {
      LogInfo("PS shard waiting for the job's first worker to define its model",
              {{"shard", f.shard_id}, {"job", job->job_id()}});
      logged = true;
    }
    if (WaitForShutdownSignal(absl::Milliseconds(500)) != 0) return 0;
    job = FetchJob(f.coordinator, absl::Seconds(f.connect_timeout_s));
  }
  if (!job.ok()) return FailShard(job.status());
  ShardHostOptions options;
  options.process_id = f.shard_id;
  options.listen = *listens;
  options.checkpoint_dir = f.checkpoint_dir;
  options.limits = f.limits;
  options.shaper = shaper.get();
  options.model_values = CoordinatorModelValues(f.coordinator, job->job_id());
  options.health = &ops.health();
  auto host = ShardHost::Start(*job, std::move(options));
  if (!host.ok()) return FailShard(host.status());
  const std::vector<int> ports = (*host)->ports();
  if (absl::Status s = WritePortFile(f.port_file, ports); !s.ok())
    return FailShard(s);
  ops.health().SetStarted();
  ops.WatchPeer("coordinator", f.coordinator);
  LogInfo("PS shard listening",
          {{"shard", f.shard_id},
           {"shards", job->shard_addresses_size() / f.partitions},
           {"partitions", f.partitions},
           {"logical_shards", absl::StrJoin((*host)->logical_ids(), ",")},
           {"job", job->job_id()},
           {"ports", absl::StrJoin(ports, ",")},
           {"parameters", (*host)->parameters()},
           {"version", (*host)->version()},
           {"checkpoints",
            f.checkpoint_dir.empty() ? std::string("off") : f.checkpoint_dir},
           {"health_port", ops.health_port()},
           {"metrics_port", ops.metrics_port()}});
  while (WaitForShutdownSignal(absl::Seconds(1)) == 0) {
  }
  // Graceful: NOT_SERVING for probes, freeze the state (later pushes and
  // finalizes answer UNAVAILABLE, so nothing is applied after the
  // checkpoint), write it, then stop serving with a short grace for the
  // calls in flight.
  LogInfo("PS shard shutting down", {{"shard", f.shard_id}});
  ops.health().SetDraining();
  return (*host)->Stop(absl::Seconds(2)).ok() ? 0 : 1;
}

}  // namespace ferry

#include <cctype>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/backoff.h"
#include "common/exit_codes.h"
#include "common/file_system.h"
#include "common/link_shaper.h"
#include "common/log.h"
#include "common/shard_partitions.h"
#include "common/sharding.h"
#include "common/shutdown_signal.h"
#include "common/status_macros.h"
#include "coordinator/coordinator_client.h"
#include "ferry/v1/coordinator.grpc.pb.h"
#include "model/dlrm_weights.h"
#include "model/model_export.h"
#include "model/model_params.h"
#include "proto/job_convert.h"
#include "proto/process_ops.h"
#include "proto/rpc_util.h"
#include "ps/dlrm_init.h"
#include "ps/job_tables.h"
#include "ps/ps_checkpointer.h"
#include "ps/ps_server.h"
#include "ps/ps_service.h"
#include "ps/ps_shard.h"
#include "ps/tables_file.h"
#include "server/server_main.h"
#include "server/server_metrics.h"

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

// Elements [begin, end) of the job's starting flat buffer: from the
// coordinator at `coordinator` for a job whose model is a worker's, else
// drawn or read as every process of the job does.
absl::StatusOr<std::vector<float>> InitialSlice(const v1::JobSpec& job,
                                                const std::string& coordinator,
                                                int64_t begin, int64_t end) {
  if (!job.model_from_worker()) return JobDenseInitialSlice(job, begin, end);
  CoordinatorClientOptions options;
  options.retry.budget = absl::Seconds(60);
  absl::StatusOr<std::vector<float>> values =
      CoordinatorClient::Connect(coordinator, options)
          ->ModelValues(job.job_id(), begin, end);
  if (!values.ok()) {
    return absl::Status(
        values.status().code(),
        absl::StrCat("cannot fetch the job's starting values from the "
                     "coordinator at ",
                     coordinator, ": ", values.status().message()));
  }
  return values;
}

absl::StatusOr<PsShardConfig> ShardConfigFor(const v1::JobSpec& job,
                                             int shard_id,
                                             const PsLimits& limits,
                                             const std::string& coordinator) {
  if (shard_id < 0 || shard_id >= job.shard_addresses_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shard-id ", shard_id, " is outside the job's ",
                     job.shard_addresses_size(), " shards"));
  }
  ASSIGN_OR_RETURN(const ParameterLayout layout, JobDenseLayout(job));
  ASSIGN_OR_RETURN(const int64_t state_elements, JobStateElements(job));
  RETURN_IF_ERROR(CheckJobTensors(job, layout));
  // Hybrid mode: the dense layers live on the workers (their ring); the
  // shards hold only the embedding tables.
  const bool dense_here = job.mode() != v1::MODE_HYBRID;
  const FlatRange range = ShardRange(dense_here ? layout.total_elements() : 0,
                                     job.shard_addresses_size(), shard_id);
  PsShardConfig config;
  config.job_id = job.job_id();
  config.shard_id = shard_id;
  config.num_shards = job.shard_addresses_size();
  if (dense_here) config.tensor_sizes = layout.TensorSizes();
  config.state_elements = dense_here ? state_elements : 0;
  config.max_chunk_elements = job.max_chunk_elements();
  ASSIGN_OR_RETURN(config.optimizer, JobOptimizer(job));
  config.consistency = job.consistency() == v1::CONSISTENCY_SYNC
                           ? PsConsistency::kSync
                           : PsConsistency::kAsync;
  config.global_batch = job.global_batch();
  config.sum_on_arrival = job.sum_on_arrival();
  if (dense_here) {  // only the slice: the whole model may be large
    ASSIGN_OR_RETURN(config.initial_slice,
                     InitialSlice(job, coordinator, range.begin, range.end));
  }
  config.limits = limits;
  if (IsDlrmJob(job)) {  // its embedding rows: the ones ShardOfRow places here
    ASSIGN_OR_RETURN(
        config.sparse,
        JobTablesConfig(job, shard_id, job.shard_addresses_size()));
  }
  return config;
}

}  // namespace

absl::StatusOr<int> ShardIdFromHostname(const std::string& hostname) {
  size_t digits = 0;
  while (digits < hostname.size() &&
         std::isdigit(static_cast<unsigned char>(
             hostname[hostname.size() - 1 - digits]))) {
    ++digits;
  }
  const size_t dash = hostname.size() - digits - 1;
  if (digits == 0 || digits > 6 || hostname.size() < digits + 2 ||
      hostname[dash] != '-') {
    return absl::InvalidArgumentError(absl::StrCat(
        "--shard-id-from-hostname: hostname '", hostname,
        "' does not end in -N (a StatefulSet pod name such as ferry-ps-2)"));
  }
  return std::stoi(hostname.substr(hostname.size() - digits));
}

namespace {

// One of the process's partitions: a logical shard with its checkpoints and
// gRPC server. Members are declared in the order that destroys the server
// before the checkpointer and the shard it uses.
struct Partition {
  int logical_id = 0;
  std::unique_ptr<PsShard> shard;
  std::unique_ptr<PsCheckpointer> checkpointer;
  PsServer server;
};

// Creates, resumes and starts partition `logical_id` listening on `listen`.
absl::StatusOr<std::unique_ptr<Partition>> StartPartition(
    const PsFlags& f, const v1::JobSpec& job, int logical_id,
    const std::string& listen, const std::string& checkpoint_dir,
    LinkShaper* shaper) {
  auto partition = std::make_unique<Partition>();
  partition->logical_id = logical_id;
  ASSIGN_OR_RETURN(PsShardConfig config,
                   ShardConfigFor(job, logical_id, f.limits, f.coordinator));
  ASSIGN_OR_RETURN(partition->shard, PsShard::Create(std::move(config)));
  partition->checkpointer = std::make_unique<PsCheckpointer>(
      partition->shard.get(), PosixFileSystem(), checkpoint_dir);
  PsCheckpointer& checkpointer = *partition->checkpointer;
  if (checkpointer.has_directory()) {
    ASSIGN_OR_RETURN(const int spools, DeleteStaleTablesSpools(
                                           PosixFileSystem(), checkpoint_dir));
    if (spools > 0) {
      LogWarn("deleted the spool files of an export that did not finish",
              {{"shard", logical_id}, {"files", spools}});
    }
  }
  ASSIGN_OR_RETURN(auto resumed, checkpointer.Resume());
  if (resumed.has_value()) {
    LogInfo("resumed from checkpoint", {{"shard", logical_id},
                                        {"version", resumed->version},
                                        {"path", resumed->path}});
  } else {
    if (IsDlrmJob(job) && !job.init_from().empty()) {
      // A job starting from a DLRM export or a ring DLRM's checkpoint
      // directory: the rows placed here.
      ASSIGN_OR_RETURN(const ParameterLayout dense, JobTensorLayout(job));
      absl::Status filled =
          partition->shard->FillTables([&](SparseStore& store) {
            return RestoreDlrmInitTables(job.init_from(),
                                         dense.total_elements(), store,
                                         TableScope::kPlacedHere);
          });
      if (absl::IsFailedPrecondition(filled)) {
        // An export that does not fit the job: a configuration error, not
        // one a restart mends.
        filled = absl::InvalidArgumentError(filled.message());
      }
      RETURN_IF_ERROR(filled);
      LogInfo("embedding rows from --init-from",
              {{"shard", logical_id},
               {"from", job.init_from()},
               {"rows", partition->shard->Info().sparse->total.rows}});
    }
    if (checkpointer.has_directory()) {
      // Version 0 on disk too: a job rolled back to its start (a shard
      // lost before the first checkpoint) restores it like any other
      // version.
      RETURN_IF_ERROR(checkpointer.Checkpoint(job.job_id(), 0).status());
    }
  }
  ASSIGN_OR_RETURN(partition->server,
                   StartPsServer(partition->shard.get(), listen,
                                 partition->checkpointer.get(), shaper));
  return partition;
}

}  // namespace

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
  const int logical_shards = job->shard_addresses_size();
  if (absl::Status s = CheckPartitions(logical_shards, f.partitions); !s.ok())
    return FailShard(s);
  const int processes = logical_shards / f.partitions;
  if (f.shard_id < 0 || f.shard_id >= processes) {
    return FailShard(absl::InvalidArgumentError(absl::StrCat(
        "--shard-id ", f.shard_id, " is outside the job's ", processes,
        " shard processes (", logical_shards, " shard addresses, ",
        f.partitions, " partition", f.partitions == 1 ? "" : "s", " each)")));
  }
  std::vector<std::unique_ptr<Partition>> partitions;
  std::vector<int> ports;
  std::vector<ShardGaugeSource> gauge_sources;
  const std::vector<int> logical_ids =
      ShardsOfProcess(f.shard_id, processes, f.partitions);
  int64_t parameters = 0;
  for (int i = 0; i < f.partitions; ++i) {
    // One partition: the --checkpoint-dir itself;
    // several: a subdirectory each, named by logical shard.
    const std::string dir =
        f.checkpoint_dir.empty() || f.partitions == 1
            ? f.checkpoint_dir
            : absl::StrCat(f.checkpoint_dir, "/shard-", logical_ids[i]);
    auto partition = StartPartition(f, *job, logical_ids[i], (*listens)[i], dir,
                                    shaper.get());
    if (!partition.ok()) return FailShard(partition.status());
    ports.push_back((*partition)->server.port);
    gauge_sources.push_back(
        {(*partition)->shard.get(), (*partition)->checkpointer.get()});
    parameters += (*partition)->shard->range().size();
    ops.health().Attach((*partition)->server.server.get(),
                        {"ferry.v1.ParameterServer"});
    partitions.push_back(*std::move(partition));
  }
  // Declared after the partitions, so destroyed before them.
  std::unique_ptr<ScrapeHook> gauges = ExportShardGauges(gauge_sources);
  if (absl::Status s = WritePortFile(f.port_file, ports); !s.ok())
    return FailShard(s);
  ops.health().SetStarted();
  ops.WatchPeer("coordinator", f.coordinator);
  LogInfo("PS shard listening",
          {{"shard", f.shard_id},
           {"shards", processes},
           {"partitions", f.partitions},
           {"logical_shards", absl::StrJoin(logical_ids, ",")},
           {"job", job->job_id()},
           {"ports", absl::StrJoin(ports, ",")},
           {"parameters", parameters},
           {"version", partitions.front()->shard->version()},
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
  const absl::Time start = absl::Now();
  LogInfo("PS shard shutting down", {{"shard", f.shard_id}});
  ops.health().SetDraining();
  int rc = 0;
  for (const std::unique_ptr<Partition>& p : partitions) {
    ops.health().Detach(p->server.server.get());
    auto last = p->checkpointer->CheckpointAndStop();
    if (!last.ok()) {
      LogError("final checkpoint failed",
               {{"shard", p->logical_id}, {"error", last.status()}});
      rc = 1;
    } else if (last->has_value()) {
      LogInfo("wrote checkpoint", {{"shard", p->logical_id},
                                   {"version", (*last)->version},
                                   {"path", (*last)->path}});
    }
  }
  for (const std::unique_ptr<Partition>& p : partitions) {
    p->server.Shutdown(absl::Seconds(2));
  }
  for (const std::unique_ptr<Partition>& p : partitions) {
    const PsShardInfo info = p->shard->Info();
    LogInfo("PS shard stopped",
            {{"shard", p->logical_id},
             {"version", info.version},
             {"steps_finalized_on_push", info.steps_finalized_on_push},
             {"rejected_pushes", info.rejected_pushes},
             {"seconds", absl::ToDoubleSeconds(absl::Now() - start)}});
  }
  return rc;
}

}  // namespace ferry

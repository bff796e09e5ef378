#include "ps/shard_host.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/file_system.h"
#include "common/log.h"
#include "common/shard_partitions.h"
#include "common/sharding.h"
#include "common/status_macros.h"
#include "common/step_trace.h"
#include "model/model_params.h"
#include "proto/health.h"
#include "proto/job_convert.h"
#include "proto/rpc_util.h"
#include "ps/dlrm_init.h"
#include "ps/job_tables.h"
#include "ps/ps_checkpointer.h"
#include "ps/ps_server.h"
#include "ps/ps_service.h"
#include "ps/ps_shard.h"
#include "ps/shard_gauges.h"

namespace ferry {

// One of the process's partitions: a logical shard with its checkpoints and
// gRPC server. Members are declared in the order that destroys the server
// before the checkpointer and the shard it uses.
struct ShardPartition {
  int logical_id = 0;
  std::unique_ptr<PsShard> shard;
  std::unique_ptr<PsCheckpointer> checkpointer;
  PsServer server;
};

namespace {

// Elements [begin, end) of the job's starting flat buffer: from `source`
// for a job whose model is a worker's, else drawn or read as every process
// of the job does.
absl::StatusOr<std::vector<float>> InitialSlice(const v1::JobSpec& job,
                                                const ModelValuesSource& source,
                                                int64_t begin, int64_t end) {
  if (!job.model_from_worker()) return JobDenseInitialSlice(job, begin, end);
  if (!source) {
    return absl::InvalidArgumentError(
        "the job's model is its first worker's, and this shard has no way to "
        "fetch its starting values");
  }
  absl::StatusOr<std::vector<float>> values = source(begin, end);
  if (!values.ok()) {
    return absl::Status(
        values.status().code(),
        absl::StrCat("cannot fetch the job's starting values from the "
                     "coordinator: ",
                     values.status().message()));
  }
  return values;
}

absl::StatusOr<PsShardConfig> ShardConfigFor(const v1::JobSpec& job,
                                             int shard_id,
                                             const PsLimits& limits,
                                             const ModelValuesSource& values) {
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
  ASSIGN_OR_RETURN(config.chunk_cuts,
                   JobChunkCuts(job, dense_here ? layout.total_elements() : 0));
  ASSIGN_OR_RETURN(config.optimizer, JobOptimizer(job));
  config.consistency = job.consistency() == v1::CONSISTENCY_SYNC
                           ? PsConsistency::kSync
                           : PsConsistency::kAsync;
  config.global_batch = job.global_batch();
  config.sum_on_arrival = job.sum_on_arrival();
  if (dense_here) {  // only the slice: the whole model may be large
    ASSIGN_OR_RETURN(config.initial_slice,
                     InitialSlice(job, values, range.begin, range.end));
  }
  config.limits = limits;
  if (IsDlrmJob(job)) {  // its embedding rows: the ones ShardOfRow places here
    ASSIGN_OR_RETURN(
        config.sparse,
        JobTablesConfig(job, shard_id, job.shard_addresses_size()));
  }
  return config;
}

// Creates, resumes and starts partition `logical_id` listening on `listen`.
absl::StatusOr<std::unique_ptr<ShardPartition>> StartPartition(
    const ShardHostOptions& o, const v1::JobSpec& job, int logical_id,
    const std::string& listen, const std::string& checkpoint_dir) {
  auto partition = std::make_unique<ShardPartition>();
  partition->logical_id = logical_id;
  StepTrace::AddName(absl::StrCat("ps shard ", logical_id));
  ASSIGN_OR_RETURN(PsShardConfig config,
                   ShardConfigFor(job, logical_id, o.limits, o.model_values));
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
                                 partition->checkpointer.get(), o.shaper));
  return partition;
}

}  // namespace

ShardHost::ShardHost(ShardHostOptions options) : options_(std::move(options)) {}

ShardHost::~ShardHost() { (void)Stop(); }

absl::StatusOr<std::unique_ptr<ShardHost>> ShardHost::Start(
    const v1::JobSpec& job, ShardHostOptions options) {
  const int partitions = static_cast<int>(options.listen.size());
  const int logical_shards = job.shard_addresses_size();
  RETURN_IF_ERROR(CheckPartitions(logical_shards, partitions));
  const int processes = logical_shards / partitions;
  if (options.process_id < 0 || options.process_id >= processes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--shard-id ", options.process_id, " is outside the job's ", processes,
        " shard processes (", logical_shards, " shard addresses, ", partitions,
        " partition", partitions == 1 ? "" : "s", " each)"));
  }
  auto host = absl::WrapUnique(new ShardHost(std::move(options)));
  const ShardHostOptions& o = host->options_;
  const std::vector<int> logical_ids =
      ShardsOfProcess(o.process_id, processes, partitions);
  std::vector<ShardGaugeSource> gauge_sources;
  for (int i = 0; i < partitions; ++i) {
    const std::string dir =
        o.checkpoint_dir.empty() || partitions == 1
            ? o.checkpoint_dir
            : absl::StrCat(o.checkpoint_dir, "/shard-", logical_ids[i]);
    absl::StatusOr<std::unique_ptr<ShardPartition>> started =
        StartPartition(o, job, logical_ids[i], o.listen[i], dir);
    if (!started.ok()) {
      // The ones started stop without a checkpoint: they hold what they
      // resumed.
      host->DetachHealth();
      host->stopped_ = true;
      return started.status();
    }
    std::unique_ptr<ShardPartition> partition = *std::move(started);
    gauge_sources.push_back(
        {partition->shard.get(), partition->checkpointer.get()});
    if (o.health != nullptr) {
      o.health->Attach(partition->server.server.get(),
                       {"ferry.v1.ParameterServer"});
    }
    host->partitions_.push_back(std::move(partition));
  }
  host->gauges_ = ExportShardGauges(std::move(gauge_sources));
  return host;
}

void ShardHost::DetachHealth() {
  if (options_.health == nullptr) return;
  for (const auto& p : partitions_) {
    options_.health->Detach(p->server.server.get());
  }
}

std::vector<int> ShardHost::ports() const {
  std::vector<int> ports;
  for (const auto& p : partitions_) ports.push_back(p->server.port);
  return ports;
}

std::vector<int> ShardHost::logical_ids() const {
  std::vector<int> ids;
  for (const auto& p : partitions_) ids.push_back(p->logical_id);
  return ids;
}

int64_t ShardHost::parameters() const {
  int64_t total = 0;
  for (const auto& p : partitions_) total += p->shard->range().size();
  return total;
}

int64_t ShardHost::version() const {
  return partitions_.empty() ? 0 : partitions_.front()->shard->version();
}

InProcessShard ShardHost::InProcess(int i) const {
  const ShardPartition& p = *partitions_.at(i);
  return {MakeInProcessChannel(p.server.server.get()), p.shard.get()};
}

absl::Status ShardHost::Stop(absl::Duration grace) {
  if (stopped_) return absl::OkStatus();
  stopped_ = true;
  const absl::Time start = absl::Now();
  absl::Status first_error;
  DetachHealth();
  for (const auto& p : partitions_) {
    auto last = p->checkpointer->CheckpointAndStop();
    if (!last.ok()) {
      LogError("final checkpoint failed",
               {{"shard", p->logical_id}, {"error", last.status()}});
      first_error.Update(last.status());
    } else if (last->has_value()) {
      LogInfo("wrote checkpoint", {{"shard", p->logical_id},
                                   {"version", (*last)->version},
                                   {"path", (*last)->path}});
    }
  }
  gauges_.reset();
  for (const auto& p : partitions_) p->server.Shutdown(grace);
  for (const auto& p : partitions_) {
    const PsShardInfo info = p->shard->Info();
    LogInfo("PS shard stopped",
            {{"shard", p->logical_id},
             {"version", info.version},
             {"steps_finalized_on_push", info.steps_finalized_on_push},
             {"rejected_pushes", info.rejected_pushes},
             {"seconds", absl::ToDoubleSeconds(absl::Now() - start)}});
  }
  return first_error;
}

}  // namespace ferry

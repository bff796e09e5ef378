#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/exit_codes.h"
#include "common/gradient_codec.h"
#include "common/log.h"
#include "common/sharding.h"
#include "common/shutdown_signal.h"
#include "common/status_macros.h"
#include "common/training_metrics.h"
#include "coordinator/coordinator_service.h"
#include "coordinator/grpc_shard_control.h"
#include "coordinator/ring_control.h"
#include "data/data_source.h"
#include "model/model_params.h"
#include "model/model_presets.h"
#include "proto/job_convert.h"
#include "proto/process_ops.h"
#include "proto/rpc_util.h"
#include "server/server_main.h"
#include "server/server_metrics.h"

namespace ferry {
namespace {

// DDP's default bucket: 25 MiB of fp32.
constexpr int64_t kDefaultBucketElements = 25 * 1024 * 1024 / 4;

// Logs why the coordinator cannot run; kExitConfig for an invalid
// configuration (INVALID_ARGUMENT, or `config` set), kExitFailure otherwise.
int Fail(const absl::Status& status, bool config = false) {
  LogError("cannot run the coordinator", {{"error", status}});
  return config ? kExitConfig : StartupExitCode(status);
}

absl::StatusOr<v1::JobSpec> BuildJob(const CoordinatorFlags& f,
                                     const ModelDef& model,
                                     const ParameterLayout& layout,
                                     int64_t epoch_size) {
  v1::JobSpec job;
  job.set_job_id(f.job_id);
  job.set_model(f.model);
  job.set_model_def(ModelToJson(model));
  job.set_init_from(f.init_from);
  if (!f.init_from.empty()) {  // refused now rather than by every shard
    RETURN_IF_ERROR(JobInitialValues(job, model).status());
  }
  job.set_dataset(f.dataset);
  job.set_data_dir(f.data_dir);
  job.set_global_batch(f.global_batch);
  job.set_epochs(f.epochs);
  job.set_seed(f.seed);
  ASSIGN_OR_RETURN(v1::Mode mode, ParseMode(f.mode));
  job.set_mode(mode);
  v1::Consistency consistency;
  int staleness = 0;
  RETURN_IF_ERROR(ParseConsistency(f.consistency, &consistency, &staleness));
  job.set_consistency(consistency);
  job.set_staleness(staleness);
  job.set_sync_quorum(f.sync_quorum);
  if (mode == v1::MODE_PS && f.shards.empty()) {
    return absl::InvalidArgumentError(
        "PS mode needs --shards HOST:PORT[,HOST:PORT...]");
  }
  for (const std::string& s : f.shards) job.add_shard_addresses(s);
  job.set_max_chunk_elements(f.max_chunk_elements > 0
                                 ? f.max_chunk_elements
                                 : kDefaultMaxChunkElements);
  job.set_bucket_elements(f.bucket_elements > 0 ? f.bucket_elements
                                                : kDefaultBucketElements);
  job.set_max_steps(f.max_steps);
  if (f.digest_every < 0) {
    return absl::InvalidArgumentError("--digest-every must be >= 0");
  }
  job.set_digest_every(f.digest_every);
  {
    absl::StatusOr<GradientCompression> c =
        ParseCompression(f.compression, f.error_feedback);
    if (!c.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--compression: ", c.status().message()));
    }
    *job.mutable_compression() = ToProto(*c);
  }
  for (const TensorSlot& t : layout.tensors()) {
    v1::TensorSpec* spec = job.add_tensors();
    spec->set_name(t.name);
    for (int64_t d : t.shape) spec->add_shape(d);
  }
  // The schedule counts optimizer updates: one per step in sync mode, one
  // per push (global_batch / workers samples) in async mode.
  OptimizerConfig optimizer = f.optimizer;
  const int64_t steps_per_epoch =
      (epoch_size + f.global_batch - 1) / f.global_batch;
  const int workers =
      std::max({1, f.expected_workers > 0 ? f.expected_workers : f.min_workers,
                f.expected_workers > 0 ? 0 : f.start_workers});
  RETURN_IF_ERROR(CheckModelForDistributedJob(
      model, mode == v1::MODE_RING || consistency == v1::CONSISTENCY_SYNC,
      f.global_batch, workers));
  ResolveScheduleLength(optimizer,
                        consistency == v1::CONSISTENCY_SYNC
                            ? steps_per_epoch
                            : steps_per_epoch * workers,
                        f.epochs);
  RETURN_IF_ERROR(ValidateOptimizerConfig(optimizer));
  *job.mutable_optimizer() = ToProto(optimizer);
  return job;
}

}  // namespace

int RunCoordinator(const CoordinatorFlags& f, ProcessOps& ops) {
  // Training curves: a path that cannot be written refuses the start.
  auto metrics = OpenMetricsSinks(f.metrics_jsonl, f.tensorboard_dir);
  if (!metrics.ok()) {
    return Fail(metrics.status(), /*config=*/true);
  }
  // A model that cannot be read (a missing JSON file) is a configuration
  // error as much as one that does not parse.
  auto model = ResolveModelSpec(f.model);
  if (!model.ok()) return Fail(model.status(), /*config=*/true);
  auto layout = ModelJobLayout(*model);
  if (!layout.ok()) return Fail(layout.status());
  auto data = LoadTrainTest(f.dataset, f.data_dir, *model, f.seed);
  // A dataset that is missing or unreadable is a configuration error too.
  if (!data.ok()) return Fail(data.status(), /*config=*/true);
  auto job = BuildJob(f, *model, *layout, data->train.num_samples);
  if (!job.ok()) return Fail(job.status());

  // PS mode: the shards; ring mode: only an evaluator of the members'
  // weights.
  std::unique_ptr<GrpcShardControl> shards;
  std::unique_ptr<RingControl> ring;
  if (job->mode() == v1::MODE_PS) {
    auto control =
        GrpcShardControl::Create(*job, std::move(data->test), f.export_dir);
    if (!control.ok()) return Fail(control.status());
    shards = std::move(*control);
  } else {
    auto control =
        RingControl::Create(*job, std::move(data->test), f.export_dir);
    if (!control.ok()) return Fail(control.status());
    ring = std::move(*control);
  }
  CoordinatorOptions options;
  options.job = *job;
  options.epoch_size = data->train.num_samples;
  // Only the size of the training set is needed here (the workers load
  // it): free its samples (188 MB for Fashion-MNIST) for the job's life.
  data->train = Dataset{};
  options.min_workers = f.min_workers;
  options.start_workers = f.start_workers;
  options.max_workers = f.max_workers;
  options.heartbeat_timeout = absl::Seconds(f.heartbeat_timeout_s);
  options.heartbeat_interval = absl::Seconds(f.heartbeat_interval_s);
  options.checkpoint_every = f.checkpoint_every;
  options.finalize_on_push = f.finalize_on_push;
  options.state_dir = f.state_dir;
  options.metrics = metrics->get();
  if (f.heartbeat_interval_s <= 0 ||
      f.heartbeat_timeout_s <= f.heartbeat_interval_s) {
    return Fail(absl::InvalidArgumentError(
        "--heartbeat-interval must be > 0 and below --heartbeat-timeout"));
  }
  auto core = shards != nullptr ? Coordinator::Create(options, shards.get())
                                : Coordinator::Create(options, ring.get());
  if (!core.ok()) return Fail(core.status());
  if (ring != nullptr) {
    Coordinator* coordinator = core->get();
    ring->set_member_source(
        [coordinator] { return coordinator->PeerAddresses(); });
  }

  // Declared after the core, so destroyed before it.
  std::unique_ptr<ScrapeHook> gauges = ExportCoordinatorGauges(core->get());
  CoordinatorService service(core->get());
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(builder);
  int port = 0;
  AddServingPort(builder, f.listen, &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return Fail(
        absl::UnavailableError(absl::StrCat("cannot listen on ", f.listen)));
  }
  if (absl::Status s = WritePortFile(f.port_file, port); !s.ok())
    return Fail(s);
  ops.health().Attach(server.get(), {"ferry.v1.Coordinator"});
  ops.health().SetStarted();
  LogInfo(
      "coordinator listening",
      {{"port", port},
       {"job", job->job_id()},
       {"mode", ModeName(job->mode())},
       {"consistency", ConsistencyName(job->consistency(), job->staleness())},
       {"model", job->model()},
       {"epochs", job->epochs()},
       {"epoch_samples", options.epoch_size},
       {"global_batch", job->global_batch()},
       {"health_port", ops.health_port()},
       {"metrics_port", ops.metrics_port()}});

  while (WaitForShutdownSignal(absl::Seconds(1)) == 0) {
  }
  // Graceful: NOT_SERVING for probes, save the state and answer parked
  // calls (UNAVAILABLE: workers retry against the restarted coordinator),
  // then drain in-flight calls for at most 2 s.
  const absl::Time start = absl::Now();
  LogInfo("coordinator shutting down");
  ops.health().SetDraining();
  ops.health().Detach(server.get());
  (*core)->Shutdown();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  LogInfo("coordinator stopped",
          {{"seconds", absl::ToDoubleSeconds(absl::Now() - start)}});
  return 0;
}

}  // namespace ferry

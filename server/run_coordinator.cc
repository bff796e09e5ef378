#include <memory>
#include <variant>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/exit_codes.h"
#include "common/file_system.h"
#include "common/log.h"
#include "common/shutdown_signal.h"
#include "common/status_macros.h"
#include "common/step_trace.h"
#include "common/training_metrics.h"
#include "coordinator/coordinator_service.h"
#include "coordinator/grpc_shard_control.h"
#include "coordinator/model_intake.h"
#include "coordinator/ring_control.h"
#include "model/model_export.h"
#include "proto/job_convert.h"
#include "proto/process_ops.h"
#include "proto/rpc_util.h"
#include "server/coordinator_job.h"
#include "server/server_main.h"
#include "server/server_metrics.h"

namespace ferry {
namespace {

// Logs why the coordinator cannot run; kExitConfig for an invalid
// configuration (INVALID_ARGUMENT, or `config` set), kExitFailure otherwise.
int FailCoordinator(const absl::Status& status, bool config = false) {
  LogError("cannot run the coordinator", {{"error", status}});
  return config ? kExitConfig : StartupExitCode(status);
}

// Starts the gRPC server of `service` on f.listen and writes the port file;
// nullptr after logging why not.
std::unique_ptr<grpc::Server> StartServer(const CoordinatorFlags& f,
                                          CoordinatorService& service,
                                          ProcessOps& ops, int* port) {
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(builder);
  AddServingPort(builder, f.listen, port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *port == 0) {
    FailCoordinator(
        absl::UnavailableError(absl::StrCat("cannot listen on ", f.listen)));
    return nullptr;
  }
  if (absl::Status s = WritePortFile(f.port_file, {*port}); !s.ok()) {
    FailCoordinator(s);
    return nullptr;
  }
  ops.health().Attach(server.get(), {"ferry.v1.Coordinator"});
  ops.health().SetStarted();
  return server;
}

// The model intake of a job whose model comes from its first worker, with
// the model an earlier coordinator of the job saved in f.state_dir (a
// restart) when there is one.
absl::StatusOr<std::unique_ptr<ModelIntake>> OpenModelIntake(
    const CoordinatorFlags& f, const v1::JobSpec& job) {
  ModelIntakeOptions options;
  // Buffers move by every step's mean change: every step must be one.
  options.buffers_allowed =
      job.mode() == v1::MODE_RING || job.consistency() == v1::CONSISTENCY_SYNC;
  if (!f.state_dir.empty()) {
    options.fs = PosixFileSystem();
    RETURN_IF_ERROR(options.fs->CreateDirectories(f.state_dir));
    options.save_path = JoinPath(f.state_dir, "worker_model.safetensors");
  }
  if (!f.init_from.empty()) {
    options.init_from_path = JoinPath(f.init_from, kModelWeightsFile);
    ASSIGN_OR_RETURN(
        options.init_from,
        ReadWeightsFile(PosixFileSystem(), options.init_from_path));
  }
  auto intake = std::make_unique<ModelIntake>(std::move(options), RealClock());
  ASSIGN_OR_RETURN(const bool loaded, intake->Load());
  if (loaded) LogInfo("the job's model, as its first worker defined it, read");
  return intake;
}

}  // namespace

int RunCoordinator(const CoordinatorFlags& f, ProcessOps& ops) {
  // Training curves: a path that cannot be written refuses the start.
  auto metrics = OpenMetricsSinks(f.metrics_jsonl, f.tensorboard_dir);
  if (!metrics.ok()) {
    return FailCoordinator(metrics.status(), /*config=*/true);
  }
  // A model or dataset that cannot be read (a missing file) is a
  // configuration error as much as one that does not parse or fit.
  auto built = BuildCoordinatorJob(f);
  if (!built.ok()) return FailCoordinator(built.status(), /*config=*/true);
  v1::JobSpec job = built->job;

  // Declared in the order that destroys the server before the service, the
  // service before the core, the core before its controls.
  std::unique_ptr<GrpcShardControl> shards;
  std::unique_ptr<RingControl> ring;
  std::unique_ptr<Coordinator> core;
  std::unique_ptr<ModelIntake> intake;
  std::unique_ptr<CoordinatorService> service;
  std::unique_ptr<ScrapeHook> gauges;
  std::unique_ptr<grpc::Server> server;
  int port = 0;

  // A job whose model comes from its first worker serves its spec without
  // tensors and takes the model (DefineModel) before anything else starts.
  if (job.model_from_worker()) {
    auto opened = OpenModelIntake(f, job);
    if (!opened.ok()) return FailCoordinator(opened.status());
    intake = std::move(*opened);
    service = std::make_unique<CoordinatorService>(job, intake.get());
    server = StartServer(f, *service, ops, &port);
    if (server == nullptr) return kExitFailure;
    if (!intake->defined()) {
      LogInfo("coordinator waiting for its first worker's model",
              {{"port", port}, {"job", job.job_id()}});
    }
    while (!intake->WaitDefined(absl::Milliseconds(200))) {
      if (WaitForShutdownSignal(absl::ZeroDuration()) != 0) {
        ops.health().SetDraining();
        server->Shutdown(std::chrono::system_clock::now() +
                         std::chrono::seconds(2));
        LogInfo("coordinator stopped before the job's model was defined");
        return 0;
      }
    }
    const std::vector<ParameterLayout::TensorDef> tensors = *intake->tensors();
    const size_t first_buffer = tensors.size() - intake->buffer_tensors();
    for (size_t i = 0; i < tensors.size(); ++i) {
      v1::TensorSpec* spec = job.add_tensors();
      spec->set_name(tensors[i].name);
      for (int64_t d : tensors[i].shape) spec->add_shape(d);
      spec->set_buffer(i >= first_buffer);
    }
    if (std::optional<v1::OptimizerSpec> optimizer = intake->optimizer()) {
      *job.mutable_optimizer() = *std::move(optimizer);
    }
    LogInfo(
        "the job's model is defined",
        {{"tensors", job.tensors_size()},
         {"optimizer_groups", job.optimizer().groups_size()},
         {"lr_table", !job.optimizer().lr_by_step().empty() ||
                          (job.optimizer().groups_size() > 0 &&
                           !job.optimizer().groups(0).lr_by_step().empty())}});
  }

  // PS and hybrid mode: the shards (hybrid: they evaluate with a ring
  // member's dense weights); ring mode: only an evaluator of the members'
  // weights (and a DLRM's tables).
  if (ModeHasShards(job.mode())) {
    auto control =
        GrpcShardControl::Create(job, std::move(built->test_set), f.export_dir);
    if (!control.ok()) return FailCoordinator(control.status());
    shards = std::move(*control);
  } else {
    auto control =
        RingControl::Create(job, std::move(built->test_set), f.export_dir);
    if (!control.ok()) return FailCoordinator(control.status());
    ring = std::move(*control);
  }
  CoordinatorOptions options;
  options.job = job;
  options.epoch_size = built->epoch_size;
  options.min_workers = f.min_workers;
  options.start_workers = f.start_workers;
  options.max_workers = f.max_workers;
  options.heartbeat_timeout = absl::Seconds(f.heartbeat_timeout_s);
  options.heartbeat_interval = absl::Seconds(f.heartbeat_interval_s);
  options.checkpoint_every = f.checkpoint_every;
  options.checkpoint_wait_limit = absl::Seconds(f.checkpoint_wait_limit_s);
  options.finalize_on_push = f.finalize_on_push;
  options.state_dir = f.state_dir;
  options.state_sync_interval = absl::Seconds(f.state_sync_interval_s);
  options.metrics = metrics->get();
  if (f.heartbeat_interval_s <= 0 ||
      f.heartbeat_timeout_s <= f.heartbeat_interval_s) {
    return FailCoordinator(absl::InvalidArgumentError(
        "--heartbeat-interval must be > 0 and below --heartbeat-timeout"));
  }
  auto created = shards != nullptr ? Coordinator::Create(options, shards.get())
                                   : Coordinator::Create(options, ring.get());
  if (!created.ok()) return FailCoordinator(created.status());
  core = std::move(*created);
  Coordinator* coordinator = core.get();
  auto members = [coordinator] { return coordinator->PeerAddresses(); };
  if (ring != nullptr) ring->set_member_source(members);
  if (shards != nullptr) shards->set_member_source(members);

  gauges = ExportCoordinatorGauges(coordinator);
  if (service != nullptr) {
    service->Attach(coordinator);
  } else {
    service = std::make_unique<CoordinatorService>(coordinator);
    server = StartServer(f, *service, ops, &port);
    if (server == nullptr) return kExitFailure;
  }
  StepTrace::AddName("coordinator");
  LogInfo("coordinator listening",
          {{"port", port},
           {"job", job.job_id()},
           {"mode", ModeName(job.mode())},
           {"consistency", ConsistencyName(job.consistency(), job.staleness())},
           {"model", job.model()},
           {"epochs", job.epochs()},
           {"epoch_samples", options.epoch_size},
           {"global_batch", job.global_batch()},
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
  core->Shutdown();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  LogInfo("coordinator stopped",
          {{"seconds", absl::ToDoubleSeconds(absl::Now() - start)}});
  return 0;
}

}  // namespace ferry

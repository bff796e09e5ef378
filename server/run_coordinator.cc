#include <memory>
#include <variant>

#include "absl/strings/str_cat.h"
#include "common/exit_codes.h"
#include "common/log.h"
#include "common/shutdown_signal.h"
#include "common/training_metrics.h"
#include "coordinator/coordinator_service.h"
#include "coordinator/grpc_shard_control.h"
#include "coordinator/ring_control.h"
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
int Fail(const absl::Status& status, bool config = false) {
  LogError("cannot run the coordinator", {{"error", status}});
  return config ? kExitConfig : StartupExitCode(status);
}

}  // namespace

int RunCoordinator(const CoordinatorFlags& f, ProcessOps& ops) {
  // Training curves: a path that cannot be written refuses the start.
  auto metrics = OpenMetricsSinks(f.metrics_jsonl, f.tensorboard_dir);
  if (!metrics.ok()) {
    return Fail(metrics.status(), /*config=*/true);
  }
  // A model or dataset that cannot be read (a missing file) is a
  // configuration error as much as one that does not parse or fit.
  auto built = BuildCoordinatorJob(f);
  if (!built.ok()) return Fail(built.status(), /*config=*/true);
  const v1::JobSpec* job = &built->job;

  // PS and hybrid mode: the shards (hybrid: they evaluate with a ring
  // member's dense weights); ring mode: only an evaluator of the members'
  // weights (and a DLRM's tables).
  std::unique_ptr<GrpcShardControl> shards;
  std::unique_ptr<RingControl> ring;
  if (ModeHasShards(job->mode())) {
    auto control = GrpcShardControl::Create(*job, std::move(built->test_set),
                                            f.export_dir);
    if (!control.ok()) return Fail(control.status());
    shards = std::move(*control);
  } else {
    auto control =
        RingControl::Create(*job, std::move(built->test_set), f.export_dir);
    if (!control.ok()) return Fail(control.status());
    ring = std::move(*control);
  }
  CoordinatorOptions options;
  options.job = *job;
  options.epoch_size = built->epoch_size;
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
  Coordinator* coordinator = core->get();
  auto members = [coordinator] { return coordinator->PeerAddresses(); };
  if (ring != nullptr) ring->set_member_source(members);
  if (shards != nullptr) shards->set_member_source(members);

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
  if (absl::Status s = WritePortFile(f.port_file, {port}); !s.ok())
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

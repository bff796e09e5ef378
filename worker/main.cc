// ferry-worker: trains alone (--standalone) or as a stateless member of a
// job run by a coordinator (--coordinator HOST:PORT).
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/allocator_tuning.h"
#include "common/cli_flags.h"
#include "common/exit_codes.h"
#include "common/log.h"
#include "common/mutex_checks.h"
#include "common/ops_flags.h"
#include "common/pod_name.h"
#include "common/progress.h"
#include "common/status_macros.h"
#include "model/dlrm_spec.h"
#include "model/embedding_options.h"
#include "pipeline/stage_memory.h"
#include "proto/process_ops.h"
#include "worker/distributed_worker.h"
#include "worker/grpc_worker_deps.h"
#include "worker/hosted_shard.h"
#include "worker/standalone_trainer.h"

namespace {

int WriteSummary(const nlohmann::json& json, const std::string& path) {
  if (path.empty()) return 0;
  std::ofstream out(path);
  out << json.dump(2) << "\n";
  if (!out) {
    std::cerr << "ferry-worker: cannot write " << path << "\n";
    return 1;
  }
  return 0;
}

int RunStandaloneMain(ferry::TrainOptions options,
                      const ferry::OptimizerFlags& opt_flags,
                      const ferry::EmbeddingFlags& embedding_flags,
                      const ferry::PipelineFlags& pipeline_flags,
                      const std::string& memory_budget,
                      const std::string& device,
                      const std::string& summary_path) {
  auto config = opt_flags.ToConfig();
  if (!config.ok()) {
    std::cerr << "ferry-worker: " << config.status().message() << "\n";
    return ferry::kExitConfig;
  }
  options.optimizer = *config;
  auto choice = ferry::ParseDeviceChoice(device);
  if (!choice.ok()) {
    std::cerr << "ferry-worker: " << choice.status().message() << "\n";
    return ferry::kExitConfig;
  }
  options.device = *choice;
  const bool dlrm = ferry::IsDlrmModelText(options.model);
  if (dlrm && pipeline_flags.given()) {
    std::cerr << "ferry-worker: pipeline stages split sequential models; "
                 "a DLRM is not one\n";
    return ferry::kExitConfig;
  }
  if (dlrm) {
    auto embedding = ferry::ToEmbeddingOptions(embedding_flags);
    if (!embedding.ok()) {
      std::cerr << "ferry-worker: " << embedding.status().message() << "\n";
      return ferry::kExitConfig;
    }
    options.embedding = *embedding;
  } else if (embedding_flags.given()) {
    std::cerr << "ferry-worker: the --embedding-* flags apply to DLRM models "
                 "(--model dlrm or a JSON file with \"kind\": \"dlrm\"), "
                 "not to --model "
              << options.model << "\n";
    return ferry::kExitConfig;
  }
  if (pipeline_flags.given() || !memory_budget.empty()) {
    auto pipeline = ferry::ParsePipelineFlags(pipeline_flags);
    absl::StatusOr<int64_t> budget = int64_t{0};
    if (!memory_budget.empty()) budget = ferry::ParseByteSize(memory_budget);
    if (!pipeline.ok() || !budget.ok()) {
      std::cerr << "ferry-worker: "
                << (!pipeline.ok() ? pipeline.status().message()
                                   : absl::StrCat("--worker-memory-budget: ",
                                                  budget.status().message()))
                << "\n";
      return ferry::kExitConfig;
    }
    options.pipeline = *pipeline;
    options.memory_budget_bytes = *budget;
  }
  ferry::ProgressPrinter progress(stderr);
  absl::StatusOr<ferry::TrainSummary> summary =
      ferry::RunStandalone(options, progress);
  if (absl::IsResourceExhausted(summary.status())) {
    // Over the memory budget: a configuration to change, nothing ran.
    std::cerr << "ferry-worker: " << summary.status().message() << "\n";
    return ferry::kExitConfig;
  }
  if (!summary.ok()) {
    std::cerr << "ferry-worker: " << summary.status() << "\n";
    return ferry::StartupExitCode(summary.status());
  }
  const ferry::TestScores& test = summary->test;
  const std::string scores =
      test.auc.has_value()
          ? absl::StrFormat("test auc %.4f, test logloss %.4f", *test.auc,
                            test.loss)
          : absl::StrFormat("test accuracy %.4f", test.accuracy);
  std::printf("done: %d epochs, %lld steps, %s, %.0f samples/s, %.1f s\n",
              summary->epochs, static_cast<long long>(summary->steps),
              scores.c_str(), summary->samples_per_second,
              summary->wall_seconds);
  return WriteSummary(summary->ToJson(), summary_path);
}

std::atomic<bool> g_stop_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free);

void RequestStop(int) { g_stop_requested.store(true); }

// SIGTERM / SIGINT ask the worker to finish its step and leave; a second one
// kills it (SA_RESETHAND restores the default action).
void InstallStopHandlers() {
  struct sigaction action = {};
  action.sa_handler = RequestStop;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

// Serves the hosted shards until SIGTERM/SIGINT (also after training
// ended: other workers and the coordinator's evaluation still use them),
// then writes their last checkpoint. Returns 1 when it failed.
int StopHostedShards(ferry::HostedShards& hosted, ferry::HealthState& health) {
  if (!g_stop_requested.load()) {
    ferry::LogInfo(
        "training is over for this worker; serving its PS shard "
        "until SIGTERM");
  }
  while (!g_stop_requested.load()) absl::SleepFor(absl::Milliseconds(250));
  health.SetDraining();
  ferry::LogInfo("PS shard shutting down");
  return hosted.host->Stop().ok() ? 0 : 1;
}

int RunDistributedMain(ferry::WorkerOptions options, const std::string& device,
                       double rpc_timeout_s, const std::string& summary_path,
                       const ferry::OpsFlags& ops_flags, bool idle_after_finish,
                       const ferry::HostedShardFlags& shard_flags) {
  auto choice = ferry::ParseDeviceChoice(device);
  if (!choice.ok()) {
    std::cerr << "ferry-worker: " << choice.status().message() << "\n";
    return ferry::kExitConfig;
  }
  options.device = *choice;
  options.rpc_timeout = absl::Seconds(rpc_timeout_s);
  options.stop_requested = &g_stop_requested;
  InstallStopHandlers();
  auto ops =
      ferry::ProcessOps::Start(ops_flags, "worker", ferry::MetricRole::kWorker);
  if (!ops.ok()) {
    std::cerr << "ferry-worker: " << ops.status().message() << "\n";
    return ferry::StartupExitCode(ops.status());
  }
  // Ready while the coordinator answers; draining from the first SIGTERM.
  (*ops)->health().SetStarted();
  (*ops)->DrainWhen(&g_stop_requested);
  (*ops)->WatchPeer("coordinator", options.coordinator_address);
  options.health = &(*ops)->health();
  std::optional<ferry::HostedShards> hosted;
  if (shard_flags.enabled()) {
    auto started = ferry::StartHostedShards(shard_flags, options);
    if (!started.ok()) {
      (*ops)->health().SetDraining();
      ferry::LogError("cannot host the PS shard",
                      {{"error", started.status()}});
      return ferry::StartupExitCode(started.status());
    }
    hosted = *std::move(started);
  }
  absl::StatusOr<ferry::WorkerSummary> summary;
  for (int rejoins = 0;; ++rejoins) {
    // Fresh deps each time: the old peer server and channels go with the
    // evicted member.
    auto deps = ferry::MakeGrpcWorkerDeps(
        options,
        hosted ? hosted->Shards() : std::map<int, ferry::InProcessShard>(),
        hosted ? hosted->shaper.get() : nullptr);
    if (!deps.ok()) {
      ferry::LogError("worker failed", {{"error", deps.status()}});
      if (hosted)
        return std::max(1, StopHostedShards(*hosted, (*ops)->health()));
      (*ops)->health().SetDraining();
      return 1;
    }
    summary = ferry::RunDistributedWorker(options, *std::move(deps));
    if (summary.ok() || !ferry::IsEviction(summary.status()) ||
        rejoins >= options.max_rejoins || g_stop_requested.load())
      break;
    // Paused past the heartbeat timeout (a stopped process, a frozen VM):
    // the job went on without it; it joins again as a new member.
    ferry::LogWarn("evicted: registering again as a new member",
                   {{"error", summary.status()},
                    {"rejoin", rejoins + 1},
                    {"max_rejoins", options.max_rejoins}});
  }
  // A worker that stays after the job (--after-finish wait) stays alive for
  // its liveness probe: a Deployment would restart an exited container.
  const bool idle =
      idle_after_finish && summary.ok() && summary->end_reason == "finished";
  if (!idle && !hosted) (*ops)->health().SetDraining();
  if (!summary.ok()) {
    ferry::LogError("worker failed", {{"error", summary.status()}});
    if (hosted) StopHostedShards(*hosted, (*ops)->health());
    return 1;
  }
  std::printf(
      "%s: %lld steps, %lld samples, compute %.1f s, comm %.1f s, %.1f s\n",
      summary->end_reason.c_str(), static_cast<long long>(summary->steps),
      static_cast<long long>(summary->samples), summary->compute_seconds,
      summary->comm_seconds, summary->wall_seconds);
  if (!summary_path.empty()) {
    std::ofstream out(summary_path);
    out << summary->ToJson().dump(2) << "\n";
    if (!out) {
      std::cerr << "ferry-worker: cannot write " << summary_path << "\n";
      return 1;
    }
  }
  if (hosted) return StopHostedShards(*hosted, (*ops)->health());
  if (idle) {
    ferry::LogInfo(
        "the job has finished; idle until SIGTERM (--after-finish wait)");
    while (!g_stop_requested.load()) absl::SleepFor(absl::Milliseconds(250));
    (*ops)->health().SetDraining();
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ferry::TuneAllocatorForLargeMessages(argv);
  ferry::ConfigureMutexDeadlockChecks();
  CLI::App app{"ferry-worker: a stateless training worker"};
  bool standalone = false;
  ferry::TrainOptions options;
  ferry::OptimizerFlags opt_flags;
  std::string device = "auto";
  std::string summary_path;

  ferry::WorkerOptions worker_options;
  double rpc_timeout_s = 30.0;
  app.footer(
      "Modes (exactly one):\n"
      "  --standalone            train alone in this process; the model, "
      "data,\n"
      "                          training and optimizer flags apply.\n"
      "  --coordinator HOST:PORT join the job that coordinator runs: the "
      "model, data,\n"
      "                          optimizer, batch and seed come from the job, "
      "so only\n"
      "                          --device, --threads, --rpc-timeout, "
      "--peer-*,\n"
      "                          --collective-timeout, --link-*, "
      "--summary-json,\n"
      "                          --host-shard, --shard-* and the "
      "Operations/Security flags apply.\n"
      "                          SIGTERM/SIGINT finish the current step and "
      "leave the job (exit 0);\n"
      "                          a second signal kills. With --host-shard the "
      "process serves its shard\n"
      "                          until SIGTERM, also after training ends, "
      "and then checkpoints it.\n"
      "Every flag can also be set as FERRY_<FLAG> (e.g. FERRY_COORDINATOR).\n"
      "Exit status: 0 done, 1 runtime error (incl. eviction), 2 invalid "
      "configuration (bad usage, a model the dataset does not fit).");
  app.add_flag("--standalone", standalone, "train in this process alone");
  app.add_option("--coordinator", worker_options.coordinator_address,
                 "HOST:PORT of the job's coordinator (distributed mode)");
  app.add_option(
         "--rpc-timeout", rpc_timeout_s,
         "deadline in seconds of each coordinator / PS call (distributed mode)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  double collective_timeout_s = 30.0;
  app.add_option(
         "--peer-listen", worker_options.peer_listen_address,
         "HOST:PORT the ring peer service listens on (port 0: any free port)")
      ->capture_default_str();
  app.add_option(
      "--peer-advertise", worker_options.peer_advertise_address,
      "HOST[:PORT] other workers reach the peer service at (default: the "
      "listen host, or this machine's hostname for 0.0.0.0; e.g. the pod IP)");
  app.add_option(
      "--final-weights", worker_options.final_weights_path,
      "distributed mode: write the final weights here (raw fp32, flat order)");
  app.add_option(
         "--collective-timeout", collective_timeout_s,
         "ring mode: deadline in seconds of one all-reduce or broadcast")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-rejoins", worker_options.max_rejoins,
                 "distributed mode: after an eviction (paused past the "
                 "heartbeat timeout), register again as a new member at most "
                 "this many times (0: exit 1)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  AddRingSharedMemoryFlag(app, worker_options);
  std::string link_bandwidth, link_latency;
  app.add_option(
      "--link-bandwidth", link_bandwidth,
      "distributed mode: emulate a link of this rate per direction on "
      "PS pushes/pulls and ring streams, e.g. 1Gbit, 10Gbit, 25Gbit, "
      "100Mbit (bits/s) or 1.5GB/s (bytes/s); empty or 0: unlimited");
  app.add_option(
      "--link-latency", link_latency,
      "distributed mode: one-way latency added to every message sent "
      "(pipelined), e.g. 50us, 1ms; empty or 0: none");
  CLI::Option* model_flag =
      app.add_option("--model", options.model,
                     "a preset (mlp, convnet, dlrm), a ferry.model.v1 JSON "
                     "file or directory (\"kind\": \"dlrm\" for a DLRM), or "
                     "MLP sizes like 784-256-128-10 (default with "
                     "--init-from: that directory's model)")
          ->capture_default_str();
  app.add_option("--init-from", options.init_from,
                 "standalone: start from this model directory (model.json + "
                 "model.safetensors, written by --export or "
                 "scripts/ferry_torch.py) instead of the seed's weights");
  app.add_option("--export", options.export_dir,
                 "standalone: write the trained model here (model.json + "
                 "model.safetensors, loadable by PyTorch)");
  app.add_flag("--evaluate-only", options.evaluate_only,
               "standalone: evaluate the starting weights (--init-from) on "
               "the test set and stop");
  app.add_option("--dataset", options.dataset,
                 "fashion-mnist, mnist, synthetic:N, or criteo:DIR (CTR data "
                 "for DLRM: DIR/train.tsv and DIR/test.tsv, e.g. from "
                 "`ferry data ctr`)")
      ->capture_default_str();
  app.add_option(
      "--data-dir", options.data_dir,
      "directory of the IDX files (default /usr/share/datasets/fashion-mnist)");
  app.add_option("--batch", options.batch, "batch size")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--epochs", options.epochs, "epochs")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-steps", options.max_steps,
                 "stop after this many steps (0: no limit)")
      ->capture_default_str();
  app.add_option("--seed", options.seed, "seed for init and sampling")
      ->capture_default_str();
  app.add_option("--device", device, "auto, cpu or cuda")
      ->capture_default_str();
  app.add_option("--threads", options.threads, "BLAS threads (CPU backend)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--summary-json", summary_path, "write a JSON summary here");
  ferry::AddOptimizerFlags(app, opt_flags);
  ferry::EmbeddingFlags embedding_flags;
  ferry::AddEmbeddingFlags(app, embedding_flags);
  ferry::PipelineFlags pipeline_flags;
  ferry::AddPipelineFlags(app, pipeline_flags,
                          "standalone (one thread and device per stage)");
  std::string memory_budget;
  ferry::AddWorkerMemoryBudgetFlag(
      app, memory_budget,
      "--standalone refuses to start over it (a distributed job takes it on "
      "the coordinator)");
  std::string after_finish = "exit";
  app.add_option("--after-finish", after_finish,
                 "distributed mode, when the job has finished: exit, or wait "
                 "idle until "
                 "SIGTERM (for a Kubernetes Deployment, which restarts exited "
                 "containers)")
      ->capture_default_str()
      ->check(CLI::IsMember({"exit", "wait"}));
  ferry::HostedShardFlags shard_flags;
  ferry::AddHostedShardFlags(app, shard_flags);
  ferry::OpsFlags ops_flags;
  ferry::AddOpsFlags(app, ops_flags);
  ferry::BindEnvironment(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : ferry::kExitConfig;  // --help is 0
  }

  if (standalone && !worker_options.coordinator_address.empty()) {
    std::cerr
        << "ferry-worker: --standalone and --coordinator exclude each other\n";
    return ferry::kExitConfig;
  }
  if (!standalone && (!options.init_from.empty() ||
                      !options.export_dir.empty() || options.evaluate_only)) {
    std::cerr << "ferry-worker: --init-from, --export and --evaluate-only are "
                 "standalone flags; a distributed job takes them on the "
                 "coordinator (ferry local --init-from/--export)\n";
    return ferry::kExitConfig;
  }
  if (!options.init_from.empty() && model_flag->count() == 0) {
    options.model = options.init_from;  // the directory's model.json
  }
  if (!standalone && embedding_flags.given()) {
    std::cerr << "ferry-worker: the --embedding-* flags are standalone flags; "
                 "a distributed job takes its embedding options from the "
                 "coordinator\n";
    return ferry::kExitConfig;
  }
  if (!standalone && !memory_budget.empty()) {
    std::cerr << "ferry-worker: --worker-memory-budget is a standalone flag; "
                 "a distributed job takes it on the coordinator (ferry local "
                 "--worker-memory-budget)\n";
    return ferry::kExitConfig;
  }
  if (!standalone && pipeline_flags.given()) {
    std::cerr << "ferry-worker: the pipeline flags (--pipeline-stages, "
                 "--micro-batches, ...) apply to --standalone training; a "
                 "distributed job takes them on the coordinator (ferry local "
                 "--pipeline-stages, docs/pipeline.md)\n";
    return ferry::kExitConfig;
  }
  if (absl::Status resolved =
          ferry::ResolveHostedShardFlags(shard_flags, ferry::PodName());
      !resolved.ok()) {
    std::cerr << "ferry-worker: " << resolved.message() << "\n";
    return ferry::kExitConfig;
  }
  if (standalone && shard_flags.enabled()) {
    std::cerr << "ferry-worker: --host-shard serves a shard of a distributed "
                 "PS job; --standalone has none\n";
    return ferry::kExitConfig;
  }
  if (standalone) {
    return RunStandaloneMain(options, opt_flags, embedding_flags,
                             pipeline_flags, memory_budget, device,
                             summary_path);
  }
  if (worker_options.coordinator_address.empty()) {
    std::cerr << "ferry-worker: pass --coordinator HOST:PORT to join a job, or "
                 "--standalone to train alone (see --help)\n";
    return ferry::kExitConfig;
  }
  worker_options.threads = options.threads;
  worker_options.collective_timeout = absl::Seconds(collective_timeout_s);
  auto link = ferry::ParseLinkLimit(link_bandwidth, link_latency);
  if (!link.ok()) {
    std::cerr << "ferry-worker: " << link.status().message() << "\n";
    return ferry::kExitConfig;
  }
  worker_options.link = *link;
  return RunDistributedMain(worker_options, device, rpc_timeout_s, summary_path,
                            ops_flags, after_finish == "wait", shard_flags);
}

// ferry: run a local cluster, inspect a running job.
//   ferry local --mode ps --workers 2 --shards 2 --epochs 12
//   ferry status --coordinator HOST:PORT
//   ferry health --address HOST:PORT [--service liveness]
//   ferry bench compare --quick --out out/compare
//   ferry cost --model resnet50 --workers 8 --shards 4 --bandwidth 10Gbit
#include <cstdio>
#include <filesystem>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "client/bench_compare.h"
#include "client/chaos_plan.h"
#include "client/cost_command.h"
#include "client/data_command.h"
#include "client/health_command.h"
#include "client/local_cluster.h"
#include "client/status_view.h"
#include "common/cli_flags.h"
#include "common/exit_codes.h"
#include "common/link_shaper.h"
#include "common/mutex_checks.h"
#include "common/ops_flags.h"
#include "common/shutdown_signal.h"
#include "common/training_metrics.h"
#include "data/ctr_dataset.h"
#include "data/data_source.h"
#include "data/dlrm_job_check.h"
#include "model/dlrm_spec.h"
#include "model/embedding_options.h"
#include "model/model_presets.h"
#include "proto/job_convert.h"
#include "proto/rpc_security.h"

namespace {

// A double as flag text that parses back to the same value (std::to_string
// prints 6 decimals: an lr of 1e-7 would become 0).
std::string ExactNumber(double x) { return absl::StrFormat("%.17g", x); }

// Coordinator flags for the job described on the `ferry local` command line.
std::vector<std::string> JobArgs(const std::string& model,
                                 const std::string& dataset,
                                 const std::string& data_dir, int batch,
                                 int epochs, uint64_t seed,
                                 const std::string& consistency, int quorum,
                                 int64_t max_steps,
                                 const ferry::OptimizerFlags& o) {
  std::vector<std::string> args = {
      "--model",        model,
      "--dataset",      dataset,
      "--batch",        std::to_string(batch),
      "--epochs",       std::to_string(epochs),
      "--seed",         std::to_string(seed),
      "--consistency",  consistency,
      "--sync-quorum",  std::to_string(quorum),
      "--max-steps",    std::to_string(max_steps),
      "--optimizer",    o.optimizer,
      "--lr",           ExactNumber(o.lr),
      "--momentum",     ExactNumber(o.momentum),
      "--nesterov",     o.nesterov ? "true" : "false",
      "--weight-decay", ExactNumber(o.weight_decay),
      "--beta1",        ExactNumber(o.beta1),
      "--beta2",        ExactNumber(o.beta2),
      "--lr-schedule",  o.schedule,
      "--warmup-steps", std::to_string(o.warmup_steps),
      "--min-lr-ratio", ExactNumber(o.min_lr_ratio),
      "--lr-step-size", std::to_string(o.step_size),
      "--lr-gamma",     ExactNumber(o.gamma)};
  if (!data_dir.empty()) args.insert(args.end(), {"--data-dir", data_dir});
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  ferry::ConfigureMutexDeadlockChecks();
  ferry::BlockShutdownSignals();
  CLI::App app{
      "ferry: distributed training with parameter servers or ring all-reduce"};
  app.require_subcommand(1);

  CLI::App* local =
      app.add_subcommand("local", "run a whole job on this machine (loopback)");
  ferry::LocalClusterOptions o;
  ferry::OptimizerFlags opt;
  std::string model = "784-256-128-10", dataset = "fashion-mnist", data_dir;
  int batch = 128, epochs = 12, quorum = 0;
  uint64_t seed = 1;
  int64_t max_steps = 0;
  local
      ->add_option("--mode", o.mode,
                   "ps, ring, or hybrid (DLRM: embedding tables on the "
                   "shards, dense layers in the ring)")
      ->capture_default_str()
      ->check(CLI::IsMember({"ps", "ring", "hybrid"}));
  local->add_option("--workers", o.workers, "worker processes")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  local
      ->add_option("--shards", o.shards,
                   "PS shard processes (ps and hybrid mode)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  local
      ->add_option("--partitions", o.partitions,
                   "logical shards per shard process, each applied and "
                   "served on its own as soon as its pushes are in, so the "
                   "pulls overlap the pushes still streaming (BytePS's "
                   "partitioned model; docs/benchmarks.md)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  local->add_option("--epochs", epochs, "epochs")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  local->add_option("--batch", batch, "global batch size")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  local->add_option("--consistency", o.consistency, "sync, async or ssp:K")
      ->capture_default_str();
  local->add_option("--sync-quorum", quorum,
                    "sync: finalize after this many pushes (0: all)");
  local
      ->add_option("--model", model,
                   "a preset (mlp, convnet, dlrm), a ferry.model.v1 JSON file "
                   "or directory with model.json, or MLP sizes like "
                   "784-256-128-10")
      ->capture_default_str();
  local
      ->add_option("--dataset", dataset,
                   "fashion-mnist, mnist or synthetic:N; criteo:DIR for a DLRM")
      ->capture_default_str();
  local->add_option("--data-dir", data_dir, "IDX files directory");
  local->add_option("--device", o.device, "worker device: auto, cpu or cuda")
      ->capture_default_str();
  local->add_option("--seed", seed, "seed of init and sampling")
      ->capture_default_str();
  ferry::PipelineFlags pipeline;
  ferry::AddPipelineFlags(*local, pipeline,
                          "ring or sync PS mode: consecutive workers form "
                          "replicas, one per stage");
  std::string memory_budget;
  ferry::AddWorkerMemoryBudgetFlag(
      *local, memory_budget,
      "a job over it is refused; PS pipelines then train whole replicas only");
  local->add_option("--max-steps", max_steps,
                    "stop after this many steps (0: no limit)");
  std::string init_from, export_dir;
  CLI::Option* model_flag = local->get_option("--model");
  local->add_option("--init-from", init_from,
                    "start from this model directory (model.json + "
                    "model.safetensors, from --export or "
                    "scripts/ferry_torch.py); its model is the job's unless "
                    "--model is given");
  local->add_option("--export", export_dir,
                    "write the model here at every evaluation, the last one "
                    "at the end of the job (model.json + model.safetensors, "
                    "loadable by PyTorch)");
  int64_t bucket_elements = 0, digest_every = 0, ring_full_table_rows = 0;
  std::string compression = "none";
  bool error_feedback = true;
  local
      ->add_option("--compression", compression,
                   "gradients on the wire: none, fp16, bf16 or topk:R (R = "
                   "fraction kept)")
      ->capture_default_str();
  local
      ->add_option(
          "--error-feedback", error_feedback,
          "lossy compression: add what the wire dropped to the next step")
      ->capture_default_str();
  bool finalize_on_push = true;
  local
      ->add_option("--finalize-on-push", finalize_on_push,
                   "PS sync: shards apply a step as soon as all its "
                   "contributors pushed (false: the coordinator finalizes "
                   "every step, the path before this option)")
      ->capture_default_str();
  bool sum_on_arrival = false;
  local
      ->add_option("--sum-on-arrival", sum_on_arrival,
                   "PS sync: shards sum pushes into one buffer as they arrive "
                   "(less shard memory; a worker lost mid-step aborts the "
                   "step; sums not bitwise reproducible with 3+ workers)")
      ->capture_default_str();
  local->add_option(
      "--bucket-elements", bucket_elements,
      "ring: gradient bucket size in floats (0: 25 MiB, like DDP)");
  local->add_option(
      "--digest-every", digest_every,
      "ring: compare the members' weight digests every N steps (0: never)");
  local->add_option(
      "--ring-full-table-rows", ring_full_table_rows,
      "ring mode, DLRM: hold each embedding table as N rows (ids modulo N) "
      "and all-reduce every table's full gradient, as PyTorch DDP does (0: "
      "all-gather only the touched rows)");
  local->add_option("--summary-json", o.summary_json,
                    "write the job summary here");
  local->add_option(
      "--cluster-file", o.cluster_file,
      "keep the process list here (JSON: name, role, index, address, pid, log, "
      "status, exit_code, restarts), rewritten atomically on every change");
  local->add_option("--log-dir", o.log_dir,
                    "process logs (default: a new /tmp/ferry-local-*)");
  local->add_option("--timeout", o.timeout_s, "give up after this many seconds")
      ->capture_default_str();
  std::string chaos;
  local->add_option(
      "--chaos", chaos,
      "scripted churn: comma-separated ACTION:TARGET@TIME, times from launch, "
      "e.g. "
      "\"join:2@30s,kill:worker1@45s,term:ps0@1m,stop:coordinator@70s,"
      "cont:coordinator@75s\". join:N starts N more workers (numbered after "
      "those started before); kill/term/stop/cont send SIGKILL/SIGTERM/SIGSTOP/"
      "SIGCONT to workerK (start order), psK or coordinator; TIME: 500ms, "
      "1.5s, "
      "30s, 2m");
  local
      ->add_option(
          "--restart-delay", o.restart_delay_s,
          "seconds before a dead shard or coordinator is started again (same "
          "port, "
          "id, --checkpoint-dir/--state-dir under --log-dir); workers are not "
          "restarted")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  local
      ->add_option("--max-restarts", o.max_restarts,
                   "restarts per shard/coordinator after deaths the chaos plan "
                   "did not cause; "
                   "one more death fails the job")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  local
      ->add_option("--no-worker-grace", o.no_worker_grace_s,
                   "seconds to wait, once every worker is gone and no join is "
                   "scheduled, for "
                   "the job to finish before failing")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  // Passed to the coordinator only when given (its defaults otherwise).
  int min_workers = 1;
  local
      ->add_option("--min-workers", min_workers,
                   "no step is formed while fewer workers are members (the job "
                   "waits); the "
                   "first step always waits for all --workers")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  int64_t checkpoint_every = 0;
  double heartbeat_timeout = 0, heartbeat_interval = 0;
  CLI::Option* checkpoint_every_flag =
      local
          ->add_option("--checkpoint-every", checkpoint_every,
                       "PS: checkpoint every shard every N steps (and at every "
                       "epoch end; 0: "
                       "epoch ends only; default: the coordinator's)")
          ->check(CLI::NonNegativeNumber);
  CLI::Option* heartbeat_timeout_flag =
      local
          ->add_option("--heartbeat-timeout", heartbeat_timeout,
                       "seconds without a heartbeat before a worker is evicted "
                       "(default: the "
                       "coordinator's)")
          ->check(CLI::PositiveNumber);
  CLI::Option* heartbeat_interval_flag =
      local
          ->add_option("--heartbeat-interval", heartbeat_interval,
                       "seconds between a worker's heartbeats (default: the "
                       "coordinator's)")
          ->check(CLI::PositiveNumber);
  ferry::AddOptimizerFlags(*local, opt);
  ferry::EmbeddingFlags embedding;
  ferry::AddEmbeddingFlags(*local, embedding);
  // Training curves, written by the coordinator (a restarted one appends to
  // the JSONL and starts a new event file).
  std::string metrics_jsonl, tensorboard_dir;
  local->add_option(
      "--metrics-jsonl", metrics_jsonl,
      "append training curves here: one JSON object per committed step and per "
      "evaluation (the directory must exist)");
  local->add_option(
      "--tensorboard-dir", tensorboard_dir,
      "write training curves as TensorBoard event files here (created if "
      "missing; one directory per run to overlay runs)");
  // Link emulation, passed to every worker and shard (restarted ones too).
  std::string link_bandwidth, link_latency;
  local->add_option(
      "--link-bandwidth", link_bandwidth,
      "emulate a link of this rate per direction in every worker and shard, "
      "e.g. 1Gbit, 10Gbit, 25Gbit (bits/s) or 1.5GB/s (bytes/s); empty: "
      "unlimited");
  local->add_option(
      "--link-latency", link_latency,
      "one-way latency added to every message a worker or shard sends, e.g. "
      "50us, 1ms; empty: none");

  CLI::App* cost = app.add_subcommand(
      "cost",
      "predict bytes and step time of PS vs ring all-reduce (cost model)");
  ferry::CostFlags cost_flags;
  ferry::AddCostFlags(*cost, cost_flags);

  CLI::App* bench = app.add_subcommand("bench", "benchmarks on local clusters");
  bench->require_subcommand(1);
  CLI::App* compare =
      bench->add_subcommand("compare",
                            "sweep PS vs ring jobs, measure bytes and step "
                            "times against the cost model");
  ferry::BenchCompareFlags compare_flags;
  ferry::AddBenchCompareFlags(*compare, compare_flags);

  CLI::App* data = app.add_subcommand("data", "generate data sets");
  data->require_subcommand(1);
  ferry::DataCtrFlags ctr_flags;
  CLI::App* ctr = ferry::AddDataCtrCommand(*data, ctr_flags);

  CLI::App* status = app.add_subcommand("status", "show a running job");
  std::string coordinator;
  bool json = false;
  status->add_option("--coordinator", coordinator, "coordinator HOST:PORT")
      ->required();
  status->add_flag("--json", json, "print the raw status as JSON");
  ferry::OpsFlags client_security;
  ferry::AddClientSecurityFlags(*status, client_security);
  ferry::OpsFlags local_ops;
  ferry::AddPassThroughOpsFlags(*local, local_ops);

  CLI::App* health =
      app.add_subcommand("health",
                         "check a process's grpc.health.v1 status (exit 0 "
                         "SERVING, 1 not, 2 no answer)");
  ferry::HealthFlags health_flags;
  ferry::AddHealthFlags(*health, health_flags);
  ferry::AddClientSecurityFlags(*health, client_security);
  ferry::BindEnvironment(app);
  CLI11_PARSE(app, argc, argv);

  if (*status || *health) {
    if (absl::Status s = ferry::InstallRpcSecurity(client_security); !s.ok()) {
      std::fprintf(stderr, "ferry: %s\n", std::string(s.message()).c_str());
      return 2;
    }
  }
  if (*status) return ferry::ShowStatus(coordinator, json);
  if (*health) return ferry::RunHealth(health_flags);
  if (*cost) return ferry::RunCost(cost_flags);
  if (*ctr) return ferry::RunDataCtr(ctr_flags);
  if (*compare) return ferry::RunBenchCompare(compare_flags);
  if (auto config = opt.ToConfig(); !config.ok()) {
    std::fprintf(stderr, "ferry local: %s\n",
                 std::string(config.status().message()).c_str());
    return 2;
  }
  auto plan = ferry::ParseChaosPlan(chaos);
  if (!plan.ok()) {
    std::fprintf(stderr, "ferry local: %s\n",
                 std::string(plan.status().message()).c_str());
    return 2;
  }
  o.chaos = *std::move(plan);
  if (auto link = ferry::ParseLinkLimit(link_bandwidth, link_latency);
      !link.ok()) {
    std::fprintf(stderr, "ferry local: %s\n",
                 std::string(link.status().message()).c_str());
    return 2;
  }
  // The security flags go to every process, and ferry local's own status
  // poller calls the coordinator with them too.
  if (absl::Status s = ferry::InstallRpcSecurity(local_ops); !s.ok()) {
    std::fprintf(stderr, "ferry local: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  o.ops_args = local_ops.ToArgs();
  if (!link_bandwidth.empty())
    o.link_args.insert(o.link_args.end(), {"--link-bandwidth", link_bandwidth});
  if (!link_latency.empty())
    o.link_args.insert(o.link_args.end(), {"--link-latency", link_latency});
  o.epochs = epochs;
  o.global_batch = batch;
  if (!init_from.empty() && model_flag->count() == 0) model = init_from;
  // Paths reach the processes absolute (their working directory is not
  // ours); --model is a path only when it names an existing file.
  const auto absolute = [](std::string& path) {
    std::error_code ec;
    if (!path.empty()) path = std::filesystem::absolute(path, ec).string();
  };
  if (std::error_code ec; std::filesystem::exists(model, ec)) absolute(model);
  absolute(init_from);
  absolute(export_dir);
  if (ferry::IsCtrDatasetSpec(dataset)) {
    std::string dir = dataset.substr(dataset.find(':') + 1);
    absolute(dir);
    dataset = "criteo:" + dir;
  }
  o.job_args = JobArgs(model, dataset, data_dir, batch, epochs, seed,
                       o.consistency, quorum, max_steps, opt);
  o.job_args.insert(
      o.job_args.end(),
      {"--bucket-elements", std::to_string(bucket_elements), "--digest-every",
       std::to_string(digest_every), "--ring-full-table-rows",
       std::to_string(ring_full_table_rows)});
  o.job_args.insert(o.job_args.end(),
                    {"--compression", compression, "--error-feedback",
                     error_feedback ? "true" : "false"});
  o.job_args.insert(o.job_args.end(),
                    {"--min-workers", std::to_string(min_workers),
                     "--finalize-on-push", finalize_on_push ? "true" : "false",
                     "--sum-on-arrival", sum_on_arrival ? "true" : "false"});
  // The coordinator checks them.
  const std::vector<std::string> pipeline_args = pipeline.ToArgs();
  o.job_args.insert(o.job_args.end(), pipeline_args.begin(),
                    pipeline_args.end());
  if (!memory_budget.empty()) {  // the coordinator checks it
    o.job_args.insert(o.job_args.end(),
                      {"--worker-memory-budget", memory_budget});
  }
  if (!init_from.empty()) {
    o.job_args.insert(o.job_args.end(), {"--init-from", init_from});
  }
  if (!export_dir.empty()) {
    o.job_args.insert(o.job_args.end(), {"--export", export_dir});
  }
  if (embedding.given()) {
    o.job_args.insert(
        o.job_args.end(),
        {"--embedding-optimizer", embedding.optimizer, "--embedding-lr",
         ExactNumber(embedding.lr), "--embedding-admit-count",
         std::to_string(embedding.admit_count), "--embedding-ttl-steps",
         std::to_string(embedding.ttl_steps), "--embedding-max-mb",
         std::to_string(embedding.max_mb), "--embedding-ftrl-beta",
         ExactNumber(embedding.ftrl_beta), "--embedding-ftrl-l1",
         ExactNumber(embedding.ftrl_l1), "--embedding-ftrl-l2",
         ExactNumber(embedding.ftrl_l2)});
  }
  if (checkpoint_every_flag->count() > 0) {
    o.job_args.insert(o.job_args.end(),
                      {"--checkpoint-every", std::to_string(checkpoint_every)});
  }
  if (heartbeat_timeout_flag->count() > 0) {
    o.job_args.insert(o.job_args.end(), {"--heartbeat-timeout",
                                         std::to_string(heartbeat_timeout)});
  }
  if (heartbeat_interval_flag->count() > 0) {
    o.job_args.insert(o.job_args.end(), {"--heartbeat-interval",
                                         std::to_string(heartbeat_interval)});
  }
  // A model that does not parse, or that the dataset does not fit, is
  // refused here, before any process starts, with the coordinator's own
  // message.
  const bool dlrm = ferry::IsDlrmModelText(model);
  absl::Status fits =
      ferry::CheckEmbeddingFlagsFitModel(embedding.given(), dlrm, model);
  if (fits.ok()) fits = ferry::CheckModeFitsModel(o.mode, dlrm, model);
  if (fits.ok() && dlrm) {
    // The data is read by the coordinator (its errors end the job at once).
    absl::StatusOr<ferry::DlrmSpec> spec =
        ferry::ResolveCriteoDlrm(model, dataset);
    fits = spec.status();
    absl::StatusOr<ferry::EmbeddingOptions> options =
        ferry::ToEmbeddingOptions(embedding);
    if (fits.ok()) fits = options.status();
    if (fits.ok()) {
      fits = ferry::CheckDistributedDlrmFlags(o.mode, export_dir,
                                              ring_full_table_rows, *options);
    }
    if (fits.ok()) {
      fits = ferry::CheckRingFullTableRows(o.mode, ring_full_table_rows, model,
                                           &*spec);
    }
  } else if (fits.ok()) {
    fits = ferry::CheckRingFullTableRows(o.mode, ring_full_table_rows, model,
                                         /*spec=*/nullptr);
  }
  if (fits.ok() && !dlrm) {
    absl::StatusOr<ferry::ModelDef> model_def = ferry::ResolveModelSpec(model);
    fits = model_def.status();
    if (fits.ok()) {
      fits = ferry::CheckModelForDistributedJob(
          *model_def, o.mode == "ring" || o.consistency == "sync", batch,
          o.workers);
    }
    if (fits.ok()) {
      fits = ferry::CheckModelFitsDataset(*model_def, dataset, data_dir);
    }
  }
  if (!fits.ok()) {
    std::fprintf(stderr, "ferry local: %s\n",
                 std::string(fits.message()).c_str());
    return ferry::kExitConfig;
  }
  if (!metrics_jsonl.empty() || !tensorboard_dir.empty()) {
    // Checked here (the coordinator would refuse to start, and be restarted)
    // and made absolute (its working directory is not ours to rely on).
    if (auto ok = ferry::CheckMetricsPaths(metrics_jsonl, tensorboard_dir);
        !ok.ok()) {
      std::fprintf(stderr, "ferry local: %s\n",
                   std::string(ok.message()).c_str());
      return 2;
    }
    if (!metrics_jsonl.empty()) {
      o.job_args.insert(o.job_args.end(),
                        {"--metrics-jsonl",
                         std::filesystem::absolute(metrics_jsonl).string()});
    }
    if (!tensorboard_dir.empty()) {
      o.job_args.insert(o.job_args.end(),
                        {"--tensorboard-dir",
                         std::filesystem::absolute(tensorboard_dir).string()});
    }
  }
  const int rc = ferry::RunLocalCluster(o);
  if (rc == 0 && !export_dir.empty()) {
    // The coordinator writes it at every evaluation; the last one is the
    // job's final evaluation (before the job reports finished).
    if (std::error_code ec;
        !std::filesystem::exists(export_dir + "/model.safetensors", ec)) {
      std::fprintf(stderr,
                   "ferry local: the model was not exported to %s (see "
                   "coordinator.log)\n",
                   export_dir.c_str());
      return ferry::kExitFailure;
    }
    std::printf("model exported to %s (model.json, model.safetensors)\n",
                export_dir.c_str());
  }
  return rc;
}

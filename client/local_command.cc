#include "client/local_command.h"

#include <filesystem>

#include "absl/strings/str_format.h"
#include "client/chaos_plan.h"
#include "common/cli_main.h"
#include "common/exit_codes.h"
#include "common/file_system.h"
#include "common/link_shaper.h"
#include "common/ring_checkpoint.h"
#include "common/status_macros.h"
#include "common/training_metrics.h"
#include "data/ctr_dataset.h"
#include "data/data_source.h"
#include "data/dlrm_job_check.h"
#include "model/dlrm_spec.h"
#include "model/embedding_options.h"
#include "model/model_presets.h"
#include "proto/job_convert.h"
#include "proto/rpc_security.h"

namespace ferry {
namespace {

// A double as flag text that parses back to the same value (std::to_string
// prints 6 decimals: an lr of 1e-7 would become 0).
std::string ExactNumber(double x) { return absl::StrFormat("%.17g", x); }

void Append(std::vector<std::string>& args,
            std::initializer_list<std::string> more) {
  args.insert(args.end(), more);
}

// The coordinator's flags for the job on the command line (paths already
// absolute).
std::vector<std::string> JobArgs(const LocalCommandLine& l) {
  const OptimizerFlags& o = l.optimizer;
  std::vector<std::string> args = {
      "--model",        l.model,
      "--dataset",      l.dataset,
      "--batch",        std::to_string(l.batch),
      "--epochs",       std::to_string(l.epochs),
      "--seed",         std::to_string(l.seed),
      "--consistency",  l.options.consistency,
      "--sync-quorum",  std::to_string(l.quorum),
      "--max-steps",    std::to_string(l.max_steps),
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
  if (!l.data_dir.empty()) Append(args, {"--data-dir", l.data_dir});
  Append(args,
         {"--bucket-elements", std::to_string(l.bucket_elements),
          "--digest-every", std::to_string(l.digest_every),
          "--ring-full-table-rows", std::to_string(l.ring_full_table_rows)});
  if (l.ring_checkpoint_writers != "all") {  // ring and hybrid only
    Append(args, {"--ring-checkpoint-writers", l.ring_checkpoint_writers});
  }
  if (l.ring_shard_optimizer_state) {  // ring only
    Append(args, {"--ring-shard-optimizer-state", "true"});
  }
  Append(args, {"--compression", l.compression, "--error-feedback",
                l.error_feedback ? "true" : "false"});
  Append(args, {"--min-workers", std::to_string(l.min_workers),
                "--finalize-on-push", l.finalize_on_push ? "true" : "false",
                "--sum-on-arrival", l.sum_on_arrival ? "true" : "false",
                "--pack-chunks", l.pack_chunks ? "true" : "false"});
  const std::vector<std::string> pipeline = l.pipeline.ToArgs();
  args.insert(args.end(), pipeline.begin(), pipeline.end());
  if (!l.memory_budget.empty()) {
    Append(args, {"--worker-memory-budget", l.memory_budget});
  }
  if (!l.init_from.empty()) Append(args, {"--init-from", l.init_from});
  if (!l.export_dir.empty()) Append(args, {"--export", l.export_dir});
  if (l.embedding.given()) {
    const EmbeddingFlags& e = l.embedding;
    Append(args, {"--embedding-optimizer", e.optimizer, "--embedding-lr",
                  ExactNumber(e.lr), "--embedding-admit-count",
                  std::to_string(e.admit_count), "--embedding-ttl-steps",
                  std::to_string(e.ttl_steps), "--embedding-max-mb",
                  std::to_string(e.max_mb), "--embedding-ftrl-beta",
                  ExactNumber(e.ftrl_beta), "--embedding-ftrl-l1",
                  ExactNumber(e.ftrl_l1), "--embedding-ftrl-l2",
                  ExactNumber(e.ftrl_l2)});
  }
  if (l.state_sync_interval) {
    Append(args,
           {"--state-sync-interval", ExactNumber(*l.state_sync_interval)});
  }
  if (l.checkpoint_every) {
    Append(args, {"--checkpoint-every", std::to_string(*l.checkpoint_every)});
  }
  if (l.checkpoint_wait_limit) {
    Append(args,
           {"--checkpoint-wait-limit", ExactNumber(*l.checkpoint_wait_limit)});
  }
  if (l.heartbeat_timeout) {
    Append(args, {"--heartbeat-timeout", ExactNumber(*l.heartbeat_timeout)});
  }
  if (l.heartbeat_interval) {
    Append(args, {"--heartbeat-interval", ExactNumber(*l.heartbeat_interval)});
  }
  if (!l.metrics_jsonl.empty()) {
    Append(args, {"--metrics-jsonl", l.metrics_jsonl});
  }
  if (!l.tensorboard_dir.empty()) {
    Append(args, {"--tensorboard-dir", l.tensorboard_dir});
  }
  return args;
}

// A model that does not parse, or that the dataset or the mode does not
// fit, with the coordinator's own message.
absl::Status CheckModelFitsJob(const LocalCommandLine& l) {
  const std::string& mode = l.options.mode;
  if (l.model == "external") {
    // The model and the data are the workers' script's.
    if (l.options.worker_command.empty()) {
      return absl::InvalidArgumentError(
          "--model external takes the job's model from its workers: give "
          "--worker-command (a ferry.torch script, docs/pytorch.md)");
    }
    if (mode == "hybrid") {
      return absl::InvalidArgumentError(
          "--model external trains in --mode ps or ring");
    }
    return ParseExternalDatasetSpec(l.dataset).status();
  }
  const bool dlrm = IsDlrmModelText(l.model);
  RETURN_IF_ERROR(
      CheckEmbeddingFlagsFitModel(l.embedding.given(), dlrm, l.model));
  RETURN_IF_ERROR(CheckModeFitsModel(mode, dlrm, l.model));
  if (dlrm) {
    // The data is read by the coordinator (its errors end the job at once).
    ASSIGN_OR_RETURN(DlrmSpec spec, ResolveCriteoDlrm(l.model, l.dataset));
    ASSIGN_OR_RETURN(EmbeddingOptions options, ToEmbeddingOptions(l.embedding));
    RETURN_IF_ERROR(CheckDistributedDlrmFlags(mode, l.export_dir,
                                              l.ring_full_table_rows, options));
    return CheckRingFullTableRows(mode, l.ring_full_table_rows, l.model, &spec);
  }
  RETURN_IF_ERROR(CheckRingFullTableRows(mode, l.ring_full_table_rows, l.model,
                                         /*spec=*/nullptr));
  ASSIGN_OR_RETURN(ModelDef model_def, ResolveModelSpec(l.model));
  RETURN_IF_ERROR(CheckModelForDistributedJob(
      model_def, mode == "ring" || l.options.consistency == "sync", l.batch,
      l.options.workers));
  return CheckModelFitsDataset(model_def, l.dataset, l.data_dir);
}

// Paths reach the processes absolute (their working directory is not
// ours); --model is a path only when it names an existing file.
void MakePathsAbsolute(LocalCommandLine& l) {
  const auto absolute = [](std::string& path) {
    std::error_code ec;
    if (!path.empty()) path = std::filesystem::absolute(path, ec).string();
  };
  if (std::error_code ec; std::filesystem::exists(l.model, ec)) {
    absolute(l.model);
  }
  absolute(l.init_from);
  absolute(l.export_dir);
  absolute(l.metrics_jsonl);
  absolute(l.tensorboard_dir);
  if (IsCtrDatasetSpec(l.dataset)) {
    std::string dir = l.dataset.substr(l.dataset.find(':') + 1);
    absolute(dir);
    l.dataset = "criteo:" + dir;
  }
}

// --colocated-shards: a PS job with a worker (ferry-worker or a
// --worker-command script) for every shard process.
absl::Status CheckColocatedShards(const LocalClusterOptions& o) {
  if (!o.colocated_shards) return absl::OkStatus();
  if (o.mode != "ps") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--colocated-shards puts PS shards into workers; --mode ", o.mode,
        o.mode == "ring" ? " has no shards" : " is not supported with it"));
  }
  if (o.shards > o.workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--colocated-shards needs a worker for every shard process: --shards ",
        o.shards, " > --workers ", o.workers));
  }
  return absl::OkStatus();
}

}  // namespace

void AddLocalFlags(CLI::App& local, LocalCommandLine& line) {
  local
      .add_option("--mode", line.options.mode,
                  "ps, ring, or hybrid (DLRM: embedding tables on the "
                  "shards, dense layers in the ring)")
      ->capture_default_str()
      ->check(CLI::IsMember({"ps", "ring", "hybrid"}));
  local.add_option("--workers", line.options.workers, "worker processes")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  local
      .add_option("--shards", line.options.shards,
                  "PS shard processes (ps and hybrid mode)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  local
      .add_option("--partitions", line.options.partitions,
                  "logical shards per shard process, each applied and "
                  "served on its own as soon as its pushes are in, so the "
                  "pulls overlap the pushes still streaming (BytePS's "
                  "partitioned model; docs/benchmarks.md)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  local.add_flag(
      "--colocated-shards", line.options.colocated_shards,
      "ps mode: run shard process i inside worker i's process (BytePS's "
      "colocated mode) instead of its own; needs --shards <= --workers. "
      "Those processes are named psI, are restarted like shards, and their "
      "own pushes and pulls stay in the process (docs/architecture.md)");
  local.add_option("--epochs", line.epochs, "epochs")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  local.add_option("--batch", line.batch, "global batch size")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  local
      .add_option("--consistency", line.options.consistency,
                  "sync, async or ssp:K")
      ->capture_default_str();
  local.add_option("--sync-quorum", line.quorum,
                   "sync: finalize after this many pushes (0: all)");
  local
      .add_option("--model", line.model,
                  "a preset (mlp, convnet, dlrm), a ferry.model.v1 JSON file "
                  "or directory with model.json, MLP sizes like "
                  "784-256-128-10, or external (the --worker-command "
                  "script's model)")
      ->capture_default_str();
  local
      .add_option("--dataset", line.dataset,
                  "fashion-mnist, mnist or synthetic:N; criteo:DIR for a DLRM; "
                  "external:N (N samples) for --model external")
      ->capture_default_str();
  local.add_option("--data-dir", line.data_dir, "IDX files directory");
  local
      .add_option("--device", line.options.device,
                  "worker device: auto, cpu or cuda")
      ->capture_default_str();
  local.add_option(
      "--worker-command", line.options.worker_command,
      "run each worker as this shell command instead of ferry-worker: a "
      "PyTorch script using ferry.torch (docs/pytorch.md), which finds the "
      "coordinator in FERRY_COORDINATOR and the ferry package on PYTHONPATH");
  local.add_option("--seed", line.seed, "seed of init and sampling")
      ->capture_default_str();
  AddPipelineFlags(local, line.pipeline,
                   "ring or sync PS mode: consecutive workers form "
                   "replicas, one per stage");
  AddWorkerMemoryBudgetFlag(
      local, line.memory_budget,
      "a job over it is refused; PS pipelines then train whole replicas only");
  local.add_option("--max-steps", line.max_steps,
                   "stop after this many steps (0: no limit)");
  local.add_option("--init-from", line.init_from,
                   "start from this model directory (model.json + "
                   "model.safetensors, from --export or "
                   "scripts/ferry_torch.py); its model is the job's unless "
                   "--model is given. Or a ring job's checkpoint directory "
                   "(LOG_DIR/ring; needs --model): its newest complete "
                   "checkpoint. With --model external: the first "
                   "worker's model starts from DIR/model.safetensors (torch's "
                   "names, e.g. an earlier job's --export)");
  local.add_option("--export", line.export_dir,
                   "write the model here at every evaluation, the last one "
                   "at the end of the job (model.json + model.safetensors, "
                   "loadable by PyTorch)");
  local
      .add_option("--compression", line.compression,
                  "gradients on the wire: none, fp16, bf16 or topk:R (R = "
                  "fraction kept)")
      ->capture_default_str();
  local
      .add_option(
          "--error-feedback", line.error_feedback,
          "lossy compression: add what the wire dropped to the next step")
      ->capture_default_str();
  local
      .add_option("--finalize-on-push", line.finalize_on_push,
                  "PS sync: shards apply a step as soon as all its "
                  "contributors pushed (false: the coordinator finalizes "
                  "every step)")
      ->capture_default_str();
  local
      .add_option("--sum-on-arrival", line.sum_on_arrival,
                  "PS sync: shards sum pushes into one buffer as they arrive "
                  "(less shard memory; a worker lost mid-step aborts the "
                  "step; sums not bitwise reproducible with 3+ workers)")
      ->capture_default_str();
  local
      .add_option("--pack-chunks", line.pack_chunks,
                  "PS: consecutive tensors share chunks, so small tensors "
                  "travel as a few messages (false: one tensor per chunk at "
                  "most)")
      ->capture_default_str();
  local.add_option(
      "--bucket-elements", line.bucket_elements,
      "ring: gradient bucket size in floats (0: 25 MiB, like DDP)");
  local.add_option(
      "--digest-every", line.digest_every,
      "ring: compare the members' weight digests every N steps (0: never)");
  local
      .add_option("--ring-checkpoint-writers", line.ring_checkpoint_writers,
                  "ring and hybrid: who writes the ring checkpoints: all "
                  "(each member its 1/w part) or rank0 (rank 0 alone, one "
                  "part)")
      ->capture_default_str()
      ->check(CLI::IsMember({"all", "rank0"}));
  local
      .add_option("--ring-shard-optimizer-state",
                  line.ring_shard_optimizer_state,
                  "ring: shard the optimizer state across the members (ZeRO "
                  "stage 1: each keeps the state of its 1/w of the "
                  "parameters; a lost member's slice comes back from the "
                  "ring checkpoint under --log-dir)")
      ->capture_default_str();
  local.add_option(
      "--ring-full-table-rows", line.ring_full_table_rows,
      "ring mode, DLRM: hold each embedding table as N rows (ids modulo N) "
      "and all-reduce every table's full gradient, as PyTorch DDP does (0: "
      "all-gather only the touched rows)");
  local.add_option("--summary-json", line.options.summary_json,
                   "write the job summary here");
  local.add_option(
      "--cluster-file", line.options.cluster_file,
      "keep the process list here (JSON: name, role, index, address, pid, log, "
      "status, exit_code, restarts), rewritten atomically on every change");
  local.add_option("--log-dir", line.options.log_dir,
                   "process logs (default: a new /tmp/ferry-local-*)");
  local
      .add_option("--timeout", line.options.timeout_s,
                  "give up after this many seconds")
      ->capture_default_str();
  local.add_option(
      "--chaos", line.chaos,
      "scripted churn: comma-separated ACTION:TARGET@TIME, times from launch, "
      "e.g. "
      "\"join:2@30s,kill:worker1@45s,term:ps0@1m,stop:coordinator@70s,"
      "cont:coordinator@75s\". join:N starts N more workers (numbered after "
      "those started before); kill/term/stop/cont send SIGKILL/SIGTERM/SIGSTOP/"
      "SIGCONT to workerK (start order), psK or coordinator; TIME: 500ms, "
      "1.5s, "
      "30s, 2m");
  local
      .add_option(
          "--restart-delay", line.options.restart_delay_s,
          "seconds before a dead shard or coordinator is started again (same "
          "port, "
          "id, --checkpoint-dir/--state-dir under --log-dir); workers are not "
          "restarted")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  local
      .add_option("--max-restarts", line.options.max_restarts,
                  "restarts per shard/coordinator after deaths the chaos plan "
                  "did not cause; "
                  "one more death fails the job")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  local
      .add_option("--no-worker-grace", line.options.no_worker_grace_s,
                  "seconds to wait, once every worker is gone and no join is "
                  "scheduled, for "
                  "the job to finish before failing")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  local
      .add_option("--min-workers", line.min_workers,
                  "no step is formed while fewer workers are members (the job "
                  "waits); the "
                  "first step always waits for all --workers")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  // Passed to the coordinator only when given (its defaults otherwise).
  local
      .add_option_function<int64_t>(
          "--checkpoint-every",
          [&line](const int64_t& v) { line.checkpoint_every = v; },
          "PS: checkpoint every shard every N steps; ring and hybrid: the "
          "members write a ring checkpoint every N steps (both also at "
          "every epoch end; 0: epoch ends only; default: the "
          "coordinator's)")
      ->check(CLI::NonNegativeNumber);
  local
      .add_option_function<double>(
          "--checkpoint-wait-limit",
          [&line](const double& v) { line.checkpoint_wait_limit = v; },
          "PS: seconds the next epoch may wait for its start's checkpoint "
          "(a full or read-only disk) before the job is reported stuck, "
          "which ends ferry local (default: the coordinator's, 300)")
      ->check(CLI::PositiveNumber);
  local
      .add_option_function<double>(
          "--state-sync-interval",
          [&line](const double& v) { line.state_sync_interval = v; },
          "seconds between fsyncs of the coordinator's state (0: every "
          "save; default: the coordinator's)")
      ->check(CLI::NonNegativeNumber);
  local
      .add_option_function<double>(
          "--heartbeat-timeout",
          [&line](const double& v) { line.heartbeat_timeout = v; },
          "seconds without a heartbeat before a worker is evicted "
          "(default: the "
          "coordinator's)")
      ->check(CLI::PositiveNumber);
  local
      .add_option_function<double>(
          "--heartbeat-interval",
          [&line](const double& v) { line.heartbeat_interval = v; },
          "seconds between a worker's heartbeats (default: the "
          "coordinator's)")
      ->check(CLI::PositiveNumber);
  AddOptimizerFlags(local, line.optimizer);
  AddEmbeddingFlags(local, line.embedding);
  // Training curves, written by the coordinator (a restarted one appends to
  // the JSONL and starts a new event file).
  local.add_option(
      "--metrics-jsonl", line.metrics_jsonl,
      "append training curves here: one JSON object per committed step and per "
      "evaluation (the directory must exist)");
  local.add_option(
      "--tensorboard-dir", line.tensorboard_dir,
      "write training curves as TensorBoard event files here (created if "
      "missing; one directory per run to overlay runs)");
  // Link emulation, passed to every worker and shard (restarted ones too).
  local.add_option(
      "--link-bandwidth", line.link_bandwidth,
      "emulate a link of this rate per direction in every worker and shard, "
      "e.g. 1Gbit, 10Gbit, 25Gbit (bits/s) or 1.5GB/s (bytes/s); empty: "
      "unlimited");
  local.add_option(
      "--link-latency", line.link_latency,
      "one-way latency added to every message a worker or shard sends, e.g. "
      "50us, 1ms; empty: none");

  AddPassThroughOpsFlags(local, line.ops);
  line.model_flag = local.get_option("--model");
}

absl::StatusOr<LocalClusterOptions> ResolveLocalCommand(LocalCommandLine line) {
  RETURN_IF_ERROR(line.optimizer.ToConfig().status());
  LocalClusterOptions& o = line.options;
  ASSIGN_OR_RETURN(o.chaos, ParseChaosPlan(line.chaos));
  RETURN_IF_ERROR(CheckColocatedShards(o));
  RETURN_IF_ERROR(
      ParseLinkLimit(line.link_bandwidth, line.link_latency).status());
  // The security flags go to every process, and ferry local's own status
  // poller calls the coordinator with them too.
  RETURN_IF_ERROR(InstallRpcSecurity(line.ops));
  o.ops_args = line.ops.ToArgs();
  if (!line.link_bandwidth.empty()) {
    Append(o.link_args, {"--link-bandwidth", line.link_bandwidth});
  }
  if (!line.link_latency.empty()) {
    Append(o.link_args, {"--link-latency", line.link_latency});
  }
  o.epochs = line.epochs;
  o.global_batch = line.batch;
  if (!line.init_from.empty() &&
      (line.model_flag == nullptr || line.model_flag->count() == 0)) {
    if (HasRingCheckpoint(PosixFileSystem(), line.init_from) &&
        !PosixFileSystem()
             ->ReadFile(absl::StrCat(line.init_from, "/model.json"))
             .ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--init-from ", line.init_from,
          " is a ring job's checkpoint directory, which holds no model.json: "
          "give the job's --model too"));
    }
    line.model = line.init_from;
  }
  MakePathsAbsolute(line);
  if (absl::Status fits = CheckModelFitsJob(line); !fits.ok()) {
    // Every refusal of the job is a configuration error.
    return absl::InvalidArgumentError(fits.message());
  }
  // Checked here: the coordinator would refuse to start, and be restarted.
  RETURN_IF_ERROR(CheckMetricsPaths(line.metrics_jsonl, line.tensorboard_dir));
  o.job_args = JobArgs(line);
  return o;
}

int RunLocalCommand(const LocalCommandLine& line) {
  constexpr char kProgram[] = "ferry local";
  absl::StatusOr<LocalClusterOptions> options = ResolveLocalCommand(line);
  if (!options.ok()) {
    return ExitWithConfigError(kProgram, options.status().message());
  }
  const int rc = RunLocalCluster(*options);
  if (rc != 0 || line.export_dir.empty()) return rc;
  // The coordinator writes it at every evaluation; the last one is the
  // job's final evaluation (before the job reports finished).
  const std::string dir = std::filesystem::absolute(line.export_dir).string();
  if (std::error_code ec;
      !std::filesystem::exists(dir + "/model.safetensors", ec)) {
    return ExitWithError(
        kProgram,
        absl::InternalError(absl::StrFormat(
            "the model was not exported to %s (see coordinator.log)", dir)));
  }
  std::printf("model exported to %s (model.json, model.safetensors)\n",
              dir.c_str());
  return 0;
}

}  // namespace ferry

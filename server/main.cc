// ferry-server: runs a job's coordinator or one of its PS shards.
//   ferry-server --role coordinator --listen 0.0.0.0:7070 --shards
//   ps0:7071,ps1:7071 [job flags] ferry-server --role ps --listen 0.0.0.0:7071
//   --coordinator coord:7070 --shard-id 0
#include <unistd.h>

#include <cstdlib>

#include "CLI/CLI.hpp"
#include "common/allocator_tuning.h"
#include "common/cli_flags.h"
#include "common/exit_codes.h"
#include "common/log.h"
#include "common/mutex_checks.h"
#include "common/ops_flags.h"
#include "common/shutdown_signal.h"
#include "model/embedding_options.h"
#include "proto/process_ops.h"
#include "server/server_main.h"

int main(int argc, char** argv) {
  ferry::TuneAllocatorForLargeMessages(argv);
  ferry::ConfigureMutexDeadlockChecks();
  ferry::BlockShutdownSignals();
  CLI::App app{
      "ferry-server: coordinator or parameter-server shard of a ferry job"};
  app.footer(
      "Exit status: 0 done, 1 runtime error (supervisors restart it), 2 "
      "invalid configuration (bad usage, a model the dataset does not fit; "
      "never restarted).");
  std::string role;
  ferry::CoordinatorFlags c;
  ferry::PsFlags p;
  ferry::OptimizerFlags opt;
  std::string listen, port_file;
  app.add_option("--role", role, "coordinator or ps")
      ->required()
      ->check(CLI::IsMember({"coordinator", "ps"}));
  app.add_option(
      "--listen", listen,
      "address to serve on (default 0.0.0.0:7070 coordinator, 0.0.0.0:7071 ps; "
      "port 0 picks a free port); ps with --partitions K: one HOST:PORT "
      "(partition i on PORT+i) or K of them, comma-separated");
  app.add_option("--port-file", port_file,
                 "write the bound port to this file (ps: one line per "
                 "partition)");

  const std::string job = "Job (coordinator)";
  app.add_option("--job-id", c.job_id, "job name")
      ->capture_default_str()
      ->group(job);
  app.add_option("--model", c.model,
                 "a preset (mlp, convnet, dlrm), a ferry.model.v1 JSON file "
                 "or directory, or MLP sizes like 784-256-128-10")
      ->capture_default_str()
      ->group(job);
  app.add_option("--dataset", c.dataset,
                 "fashion-mnist, mnist or synthetic:N; criteo:DIR for a DLRM")
      ->capture_default_str()
      ->group(job);
  app.add_option("--data-dir", c.data_dir, "IDX files directory")->group(job);
  app.add_option("--batch", c.global_batch, "global batch size")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(job);
  app.add_option("--epochs", c.epochs, "epochs")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(job);
  app.add_option("--seed", c.seed, "seed of init and sampling")
      ->capture_default_str()
      ->group(job);
  app.add_option("--mode", c.mode,
                 "ps, ring, or hybrid (DLRM: tables on the shards, dense "
                 "layers in the ring)")
      ->capture_default_str()
      ->group(job);
  app.add_option("--consistency", c.consistency, "sync, async or ssp:K")
      ->capture_default_str()
      ->group(job);
  app.add_option("--sync-quorum", c.sync_quorum,
                 "sync: finalize a step after this many contributors (0: all)")
      ->capture_default_str()
      ->group(job);
  app.add_option("--shards", c.shards, "PS shard addresses, index = shard id")
      ->delimiter(',')
      ->group(job);
  app.add_option("--max-chunk-elements", c.max_chunk_elements,
                 "largest wire chunk (0: 256Ki)")
      ->group(job);
  app.add_option("--bucket-elements", c.bucket_elements,
                 "ring bucket size (0: 25 MiB)")
      ->group(job);
  ferry::AddPipelineFlags(app, c.pipeline,
                          "ring or sync PS mode: consecutive ranks form "
                          "replicas, one member per stage");
  ferry::AddWorkerMemoryBudgetFlag(
      app, c.worker_memory_budget,
      "a job over it is refused; PS pipelines then train whole replicas only");
  app.add_option(
         "--digest-every", c.digest_every,
         "ring: members report a weights digest every N steps, the coordinator "
         "counts mismatches (0: never)")
      ->capture_default_str()
      ->group(job);
  app.add_option(
         "--ring-full-table-rows", c.ring_full_table_rows,
         "ring mode, DLRM: hold each embedding table as N rows (ids modulo "
         "N) and all-reduce every table's full gradient each step, as "
         "PyTorch DDP does (0: all-gather only the touched rows)")
      ->capture_default_str()
      ->group(job);
  app.add_option("--max-steps", c.max_steps,
                 "stop after this many steps (0: no limit)")
      ->group(job);
  app.add_option("--init-from", c.init_from,
                 "start from this model directory (model.json + "
                 "model.safetensors) instead of the seed's weights; shards "
                 "and ring workers read it, so it must be at the same path "
                 "for them")
      ->group(job);
  app.add_option("--export", c.export_dir,
                 "write the model here at every evaluation (epoch ends and "
                 "the end of the job): model.json + model.safetensors, "
                 "loadable by PyTorch")
      ->group(job);
  app.add_option("--compression", c.compression,
                 "gradients on the wire: none, fp16, bf16 or topk:R (R = "
                 "fraction kept)")
      ->capture_default_str()
      ->group(job);
  app.add_option(
         "--error-feedback", c.error_feedback,
         "lossy compression: add what the wire dropped to the next step")
      ->capture_default_str()
      ->group(job);
  app.add_option(
         "--min-workers", c.min_workers,
         "no step is formed while fewer workers are members (the job waits)")
      ->capture_default_str()
      ->group(job);
  app.add_option("--start-workers", c.start_workers,
                 "the first step waits until this many workers have registered")
      ->capture_default_str()
      ->group(job);
  app.add_option(
         "--max-workers", c.max_workers,
         "refuse workers beyond this with RESOURCE_EXHAUSTED (0: no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->group(job);
  app.add_option(
         "--expected-workers", c.expected_workers,
         "async: workers assumed for the LR schedule length (0: --min-workers)")
      ->group(job);
  app.add_option("--heartbeat-timeout", c.heartbeat_timeout_s,
                 "seconds without a heartbeat before a worker is evicted")
      ->capture_default_str()
      ->group(job);
  app.add_option("--heartbeat-interval", c.heartbeat_interval_s,
                 "seconds between a worker's heartbeats")
      ->capture_default_str()
      ->group(job);
  app.add_option(
         "--state-dir", c.state_dir,
         "persist the coordinator's state here and resume from it on restart")
      ->group(job);
  app.add_option(
         "--checkpoint-every", c.checkpoint_every,
         "PS: checkpoint every shard every N steps (and at every epoch end; 0: "
         "epoch ends only)")
      ->capture_default_str()
      ->group(job);
  app.add_option(
         "--finalize-on-push", c.finalize_on_push,
         "PS sync: leases name the step's contributors so that a shard applies "
         "a step as soon as all of them pushed, without waiting for the "
         "coordinator (false: the coordinator finalizes every step)")
      ->capture_default_str()
      ->group(job);
  app.add_option("--sum-on-arrival", c.sum_on_arrival,
                 "PS sync: shards sum each pushed chunk into one buffer as it "
                 "arrives (memory: slice + optimizer state + one sum) instead "
                 "of one buffer per worker; a worker lost mid-step then aborts "
                 "the step, and sums follow arrival order (not bitwise "
                 "reproducible with 3+ workers)")
      ->capture_default_str()
      ->group(job);
  app.add_option("--metrics-jsonl", c.metrics_jsonl,
                 "append training curves here, one JSON object per committed "
                 "step and per "
                 "evaluation (the directory must exist)")
      ->group(job);
  app.add_option("--tensorboard-dir", c.tensorboard_dir,
                 "write training curves as a new TensorBoard event file in "
                 "this directory "
                 "(created if missing)")
      ->group(job);
  ferry::AddOptimizerFlags(app, opt);
  ferry::EmbeddingFlags embedding;
  ferry::AddEmbeddingFlags(app, embedding);

  const std::string ps = "PS shard";
  app.add_option("--coordinator", p.coordinator, "coordinator HOST:PORT")
      ->group(ps);
  app.add_option("--shard-id", p.shard_id, "this shard's index")
      ->capture_default_str()
      ->group(ps);
  app.add_option("--partitions", p.partitions,
                 "logical shards this process serves, each its own PS shard "
                 "on its own port (partition i on PORT+i): the job's --shards "
                 "then lists processes x partitions addresses, process p's "
                 "partition i at position p + i x processes; a sync step "
                 "applies and serves each partition as soon as its pushes "
                 "are in, so pulls overlap the pushes of later partitions "
                 "(BytePS's partitioned model)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64))
      ->group(ps);
  bool shard_id_from_hostname = false;
  app.add_flag("--shard-id-from-hostname", shard_id_from_hostname,
               "take the shard index from the -N at the end of $HOSTNAME (a "
               "StatefulSet "
               "pod such as ferry-ps-2); overrides --shard-id")
      ->group(ps);
  app.add_option("--connect-timeout", p.connect_timeout_s,
                 "seconds to keep trying to reach the coordinator")
      ->capture_default_str()
      ->group(ps);
  app.add_option("--checkpoint-dir", p.checkpoint_dir,
                 "write this shard's checkpoints here (on the coordinator's "
                 "request and at "
                 "SIGTERM) and resume from the newest one at start")
      ->group(ps);
  app.add_option(
         "--link-bandwidth", p.link_bandwidth,
         "emulate a link of this rate per direction on push/pull streams, e.g. "
         "1Gbit, 10Gbit, 25Gbit (bits/s) or 1.5GB/s (bytes/s); empty or 0: "
         "unlimited")
      ->group(ps);
  app.add_option(
         "--link-latency", p.link_latency,
         "one-way latency added to every pull message sent (pipelined), e.g. "
         "50us, 1ms; empty or 0: none")
      ->group(ps);
  const std::string limits = "PS shard limits (RESOURCE_EXHAUSTED beyond)";
  app.add_option("--max-open-pushes", p.limits.max_open_pushes,
                 "push streams received at once (each holds a buffer the size "
                 "of the slice)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(limits);
  app.add_option("--max-step-pushes", p.limits.max_step_pushes,
                 "sync: pushes (workers) buffered for the open step")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(limits);
  app.add_option("--max-async-workers", p.limits.max_async_workers,
                 "async: workers whose last step the shard remembers")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(limits);
  app.add_option("--max-pending-pulls", p.limits.max_pending_pulls,
                 "pulls waiting for a newer version")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(limits);
  app.add_option("--receive-window", p.limits.receive_window_bytes,
                 "bytes of one push stream read ahead of the shard (HTTP/2 "
                 "stream window, BDP probing off; the transport holds about "
                 "pushing workers x this), e.g. 4194304 where memory is "
                 "tight; 0: gRPC's adaptive window")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))
      ->group(limits);
  ferry::OpsFlags ops_flags;
  ferry::AddOpsFlags(app, ops_flags);
  ferry::BindEnvironment(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help is 0; any bad usage is a configuration error.
    return app.exit(e) == 0 ? 0 : ferry::kExitConfig;
  }

  if (role == "ps" && shard_id_from_hostname) {
    const char* env = std::getenv("HOSTNAME");
    char name[256] = {};
    if (env == nullptr || *env == '\0') gethostname(name, sizeof(name) - 1);
    auto id =
        ferry::ShardIdFromHostname(env != nullptr && *env != '\0' ? env : name);
    if (!id.ok()) {
      std::fprintf(stderr, "ferry-server: %s\n",
                   std::string(id.status().message()).c_str());
      return ferry::kExitConfig;
    }
    p.shard_id = *id;
  }
  auto ops = ferry::ProcessOps::Start(
      ops_flags,
      role == "coordinator" ? std::string("coordinator")
                            : "ps-" + std::to_string(p.shard_id),
      role == "coordinator" ? ferry::MetricRole::kCoordinator
                            : ferry::MetricRole::kPs);
  if (!ops.ok()) {
    std::fprintf(stderr, "ferry-server: %s\n",
                 std::string(ops.status().message()).c_str());
    return ferry::StartupExitCode(ops.status());
  }

  if (role == "coordinator") {
    auto config = opt.ToConfig();
    if (!config.ok()) {
      std::fprintf(stderr, "ferry-server: %s\n",
                   std::string(config.status().message()).c_str());
      return ferry::kExitConfig;
    }
    c.optimizer = *config;
    auto tables = ferry::ToEmbeddingOptions(embedding);
    if (!tables.ok()) {
      std::fprintf(stderr, "ferry-server: %s\n",
                   std::string(tables.status().message()).c_str());
      return ferry::kExitConfig;
    }
    c.embedding = *tables;
    c.embedding_given = embedding.given();
    if (!listen.empty()) c.listen = listen;
    c.port_file = port_file;
    return ferry::RunCoordinator(c, **ops);
  }
  if (!listen.empty()) p.listen = listen;
  p.port_file = port_file;
  return ferry::RunPsShard(p, **ops);
}

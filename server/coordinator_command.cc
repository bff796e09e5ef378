#include "server/coordinator_command.h"

#include "common/status_macros.h"
#include "model/embedding_options.h"
#include "server/server_flags.h"

namespace ferry {

void AddCoordinatorFlags(CLI::App& command, CoordinatorCommandLine& line) {
  CoordinatorFlags& f = line.flags;
  AddListenFlags(command, f.listen, f.port_file, "");
  const std::string job = "Job (coordinator)";
  command.add_option("--job-id", f.job_id, "job name")
      ->capture_default_str()
      ->group(job);
  command
      .add_option("--model", f.model,
                  "a preset (mlp, convnet, dlrm), a ferry.model.v1 JSON file "
                  "or directory, MLP sizes like 784-256-128-10, or external "
                  "(the first ferry.torch worker's model)")
      ->capture_default_str()
      ->group(job);
  command
      .add_option("--dataset", f.dataset,
                  "fashion-mnist, mnist or synthetic:N; criteo:DIR for a DLRM; "
                  "external:N (N samples) for --model external")
      ->capture_default_str()
      ->group(job);
  command.add_option("--data-dir", f.data_dir, "IDX files directory")
      ->group(job);
  command.add_option("--batch", f.global_batch, "global batch size")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(job);
  command.add_option("--epochs", f.epochs, "epochs")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(job);
  command.add_option("--seed", f.seed, "seed of init and sampling")
      ->capture_default_str()
      ->group(job);
  command
      .add_option("--mode", f.mode,
                  "ps, ring, or hybrid (DLRM: tables on the shards, dense "
                  "layers in the ring)")
      ->capture_default_str()
      ->group(job);
  command.add_option("--consistency", f.consistency, "sync, async or ssp:K")
      ->capture_default_str()
      ->group(job);
  command
      .add_option("--sync-quorum", f.sync_quorum,
                  "sync: finalize a step after this many contributors (0: all)")
      ->capture_default_str()
      ->group(job);
  command
      .add_option("--shards", f.shards, "PS shard addresses, index = shard id")
      ->delimiter(',')
      ->group(job);
  command
      .add_option("--max-chunk-elements", f.max_chunk_elements,
                  "largest wire chunk (0: 256Ki)")
      ->group(job);
  command
      .add_option("--pack-chunks", f.pack_chunks,
                  "PS: consecutive tensors share chunks, so small tensors "
                  "(biases, norms) travel as a few messages (false: one "
                  "tensor per chunk at most; pipeline jobs never pack)")
      ->capture_default_str()
      ->group(job);
  command
      .add_option("--bucket-elements", f.bucket_elements,
                  "ring bucket size (0: 25 MiB)")
      ->group(job);
  AddPipelineFlags(command, f.pipeline,
                   "ring or sync PS mode: consecutive ranks form "
                   "replicas, one member per stage");
  AddWorkerMemoryBudgetFlag(
      command, f.worker_memory_budget,
      "a job over it is refused; PS pipelines then train whole replicas only");
  command
      .add_option("--digest-every", f.digest_every,
                  "ring: members report a weights digest every N steps, the "
                  "coordinator "
                  "counts mismatches (0: never)")
      ->capture_default_str()
      ->group(job);
  command
      .add_option(
          "--ring-full-table-rows", f.ring_full_table_rows,
          "ring mode, DLRM: hold each embedding table as N rows (ids modulo "
          "N) and all-reduce every table's full gradient each step, as "
          "PyTorch DDP does (0: all-gather only the touched rows)")
      ->capture_default_str()
      ->group(job);
  command
      .add_option("--max-steps", f.max_steps,
                  "stop after this many steps (0: no limit)")
      ->group(job);
  command
      .add_option("--init-from", f.init_from,
                  "start from this model directory (model.json + "
                  "model.safetensors), or the newest complete checkpoint of "
                  "a ring job's --ring-checkpoint-dir (with --model), "
                  "instead of the seed's weights; shards "
                  "and ring workers read it, so it must be at the same path "
                  "for them. --model external: DIR/model.safetensors only, "
                  "read here, by torch's names, replacing the first "
                  "worker's values")
      ->group(job);
  command
      .add_option("--export", f.export_dir,
                  "write the model here at every evaluation (epoch ends and "
                  "the end of the job): model.json + model.safetensors, "
                  "loadable by PyTorch")
      ->group(job);
  command
      .add_option("--compression", f.compression,
                  "gradients on the wire: none, fp16, bf16 or topk:R (R = "
                  "fraction kept)")
      ->capture_default_str()
      ->group(job);
  command
      .add_option(
          "--error-feedback", f.error_feedback,
          "lossy compression: add what the wire dropped to the next step")
      ->capture_default_str()
      ->group(job);
  command
      .add_option(
          "--min-workers", f.min_workers,
          "no step is formed while fewer workers are members (the job waits)")
      ->capture_default_str()
      ->group(job);
  command
      .add_option(
          "--start-workers", f.start_workers,
          "the first step waits until this many workers have registered")
      ->capture_default_str()
      ->group(job);
  command
      .add_option(
          "--max-workers", f.max_workers,
          "refuse workers beyond this with RESOURCE_EXHAUSTED (0: no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->group(job);
  command
      .add_option("--expected-workers", f.expected_workers,
                  "async: workers assumed for the LR schedule length (0: "
                  "--min-workers)")
      ->group(job);
  command
      .add_option("--heartbeat-timeout", f.heartbeat_timeout_s,
                  "seconds without a heartbeat before a worker is evicted")
      ->capture_default_str()
      ->group(job);
  command
      .add_option("--heartbeat-interval", f.heartbeat_interval_s,
                  "seconds between a worker's heartbeats")
      ->capture_default_str()
      ->group(job);
  command
      .add_option(
          "--state-dir", f.state_dir,
          "persist the coordinator's state here and resume from it on restart")
      ->group(job);
  command
      .add_option("--state-sync-interval", f.state_sync_interval_s,
                  "seconds between fsyncs of the saved state (a machine "
                  "crash loses at most this much of it; checkpoints, "
                  "rollbacks and a stop are synced at once; 0: every save)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->group(job);
  command
      .add_option("--checkpoint-every", f.checkpoint_every,
                  "PS: checkpoint every shard every N steps; ring and "
                  "hybrid with --ring-checkpoint-dir: the members write a "
                  "checkpoint every N steps (both also at every epoch end; "
                  "0: epoch ends only)")
      ->capture_default_str()
      ->group(job);
  command
      .add_option("--checkpoint-wait-limit", f.checkpoint_wait_limit_s,
                  "PS: seconds the next epoch may wait for its start's "
                  "checkpoint (shards on a full or read-only disk) before "
                  "the job's status error says it is stuck; the retries go "
                  "on and the error clears once it is written")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(job);
  command
      .add_option(
          "--ring-checkpoint-dir", f.ring_checkpoint_dir,
          "ring and hybrid: the directory every member writes its part of "
          "the job's checkpoints (hybrid: of the dense layers) to, and a "
          "ring that lost every member holding the job's state resumes "
          "from; all members must see it at this path (a shared volume). "
          "Empty: ring jobs have no checkpoint")
      ->group(job);
  command
      .add_option("--ring-checkpoint-writers", f.ring_checkpoint_writers,
                  "ring and hybrid: who writes a ring checkpoint: all (each "
                  "member its 1/w part, at once) or rank0 (rank 0 alone, the "
                  "whole state as one part; not with --pipeline-stages)")
      ->capture_default_str()
      ->check(CLI::IsMember({"all", "rank0"}))
      ->group(job);
  command
      .add_option(
          "--ring-shard-optimizer-state", f.ring_shard_optimizer_state,
          "ring: shard the optimizer state across the members (ZeRO stage "
          "1): each member keeps the momentum/Adam state of its 1/w of the "
          "parameters, gradients are reduce-scattered and the updated "
          "parameters all-gathered. Needs --ring-checkpoint-dir (a lost "
          "member's slice comes back from the newest ring checkpoint); not "
          "with --pipeline-stages, --compression or DLRM models")
      ->capture_default_str()
      ->group(job);
  command
      .add_option(
          "--finalize-on-push", f.finalize_on_push,
          "PS sync: leases name the step's contributors so that a shard "
          "applies "
          "a step as soon as all of them pushed, without waiting for the "
          "coordinator (false: the coordinator finalizes every step)")
      ->capture_default_str()
      ->group(job);
  command
      .add_option(
          "--sum-on-arrival", f.sum_on_arrival,
          "PS sync: shards sum each pushed chunk into one buffer as it "
          "arrives (memory: slice + optimizer state + one sum) instead "
          "of one buffer per worker; a worker lost mid-step then aborts "
          "the step, and sums follow arrival order (not bitwise "
          "reproducible with 3+ workers)")
      ->capture_default_str()
      ->group(job);
  command
      .add_option("--metrics-jsonl", f.metrics_jsonl,
                  "append training curves here, one JSON object per committed "
                  "step and per "
                  "evaluation (the directory must exist)")
      ->group(job);
  command
      .add_option("--tensorboard-dir", f.tensorboard_dir,
                  "write training curves as a new TensorBoard event file in "
                  "this directory "
                  "(created if missing)")
      ->group(job);
  AddOptimizerFlags(command, line.optimizer);
  AddEmbeddingFlags(command, line.embedding);
  AddOpsFlags(command, line.ops);
}

absl::StatusOr<CoordinatorFlags> ResolveCoordinatorFlags(
    const CoordinatorCommandLine& line) {
  CoordinatorFlags flags = line.flags;
  ASSIGN_OR_RETURN(flags.optimizer, line.optimizer.ToConfig());
  ASSIGN_OR_RETURN(flags.embedding, ToEmbeddingOptions(line.embedding));
  flags.embedding_given = line.embedding.given();
  return flags;
}

}  // namespace ferry

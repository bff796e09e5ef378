// The wiring of ferry-server's two roles (main.cc only parses flags).
#ifndef FERRY_SERVER_SERVER_MAIN_H_
#define FERRY_SERVER_SERVER_MAIN_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cli_flags.h"
#include "common/optimizer_config.h"
#include "common/peer_limits.h"
#include "model/embedding_options.h"

namespace ferry {

class ProcessOps;

struct CoordinatorFlags {
  std::string listen = "0.0.0.0:7070";
  std::string port_file;  // write the bound port here (for --listen ...:0)
  std::string job_id = "ferry-job";
  std::string model = "784-256-128-10";   // or a DLRM: dlrm, a JSON file
  std::string dataset = "fashion-mnist";  // a DLRM's: criteo:DIR
  std::string data_dir;
  OptimizerConfig optimizer;
  int global_batch = 128;
  int epochs = 15;
  uint64_t seed = 1;
  std::string mode = "ps";
  std::string consistency = "sync";
  int sync_quorum = 0;
  std::vector<std::string> shards;
  int64_t max_chunk_elements = 0;  // 0: the default
  bool pack_chunks = true;         // PS: tensors share chunks
  int64_t bucket_elements = 0;     // 0: the default
  int64_t max_steps = 0;
  std::string init_from;     // a model directory the job starts from
  std::string export_dir;    // the evaluated model is written here
  int64_t digest_every = 0;  // ring: weights digest every N steps (0: never)
  // Ring mode's DLRM: 0 all-gathers the touched rows; N > 0 holds each
  // table as N rows (ids modulo N) and all-reduces its full gradient.
  int64_t ring_full_table_rows = 0;
  std::string compression =
      "none";                  // gradients on the wire: none|fp16|bf16|topk:R
  bool error_feedback = true;  // lossy compression: carry the dropped part
  int min_workers = 1;
  int start_workers = 0;
  int max_workers = kDefaultMaxWorkers;
  int expected_workers = 0;  // async schedule length; 0: min_workers
  double heartbeat_timeout_s = 5.0;
  double heartbeat_interval_s = 1.0;
  std::string state_dir;  // empty: the state lives in memory only
  // Seconds between fsyncs of the saved state (0: every save is durable).
  double state_sync_interval_s = 1.0;
  int64_t checkpoint_every = 100;  // PS and ring: steps between checkpoints
  // Seconds an epoch may wait for its start's checkpoint before the status
  // error says the job is stuck (CoordinatorOptions::checkpoint_wait_limit).
  double checkpoint_wait_limit_s = 300.0;
  // Ring: where the members write the job's checkpoints (JobSpec.
  // ring_checkpoint_dir); empty: none.
  std::string ring_checkpoint_dir;
  // Who writes them: "all" (each member 1/w) or "rank0" (one part).
  std::string ring_checkpoint_writers = "all";
  // Ring: the optimizer state sharded across the members (JobSpec.
  // ring_shard_optimizer_state).
  bool ring_shard_optimizer_state = false;
  bool finalize_on_push =
      true;                     // PS sync: shards apply a step on its last push
  bool sum_on_arrival = false;  // PS sync: shards sum pushes as they arrive
  std::string metrics_jsonl;    // training curves as JSON lines (appended)
  std::string tensorboard_dir;  // training curves as TensorBoard events
  // A DLRM's embedding tables (the --embedding-* flags), and whether any of
  // those flags was given (refused with a dense model).
  EmbeddingOptions embedding;
  bool embedding_given = false;
  // Pipeline parallelism (ring or sync PS mode; JobSpec.pipeline_*).
  PipelineFlags pipeline;
  // Per-worker memory budget, e.g. "512MiB" (empty: none;
  // JobSpec.worker_memory_budget_bytes).
  std::string worker_memory_budget;
};

struct PsFlags {
  std::string listen = "0.0.0.0:7071";
  std::string port_file;
  std::string coordinator;
  int shard_id = 0;  // the process's index among the job's shard processes
  // Logical shards this process serves (common/shard_partitions.h): the
  // job's shard addresses are shard processes x partitions.
  int partitions = 1;
  double connect_timeout_s = 60.0;
  // Checkpoints of this shard (empty: none; Checkpoint, and Restore to any
  // version but the current one, answer FAILED_PRECONDITION). The newest
  // valid one is resumed at start; one is written at SIGTERM/SIGINT.
  std::string checkpoint_dir;
  // Link emulation of this shard's push and pull streams (ParseLinkLimit
  // text; empty: unlimited / no latency).
  std::string link_bandwidth;
  std::string link_latency;
  // What peers may make this shard hold; RESOURCE_EXHAUSTED beyond.
  PsLimits limits;
};

// Writes `ports` to `path`, one per line, atomically (temp file + rename)
// so a launcher polling the file never reads half of it. No-op for an empty
// path.
absl::Status WritePortFile(const std::string& path,
                           const std::vector<int>& ports);

// The StatefulSet ordinal at the end of a pod's hostname: "ferry-ps-2" -> 2.
// INVALID_ARGUMENT when the name does not end in -N.
absl::StatusOr<int> ShardIdFromHostname(const std::string& hostname);

// Run until SIGINT/SIGTERM. Return the process exit code; errors are
// logged. BlockShutdownSignals() must have been called. `ops` (logging,
// security, health, metrics) is already started; readiness turns SERVING
// once the role serves and NOT_SERVING when it drains.
int RunCoordinator(const CoordinatorFlags& flags, ProcessOps& ops);
int RunPsShard(const PsFlags& flags, ProcessOps& ops);

}  // namespace ferry

#endif  // FERRY_SERVER_SERVER_MAIN_H_

// `ferry local`: its flags, and how they become the LocalClusterOptions of a
// whole job on this machine (client/local_cluster.h). Everything that can
// be refused before a process starts is refused here, with the message the
// coordinator would give.
#ifndef FERRY_CLIENT_LOCAL_COMMAND_H_
#define FERRY_CLIENT_LOCAL_COMMAND_H_

#include <cstdint>
#include <optional>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "client/local_cluster.h"
#include "common/cli_flags.h"
#include "common/ops_flags.h"

namespace ferry {

// `ferry local`'s command line as typed.
struct LocalCommandLine {
  LocalClusterOptions options;  // launcher flags; job_args built by Resolve
  OptimizerFlags optimizer;
  EmbeddingFlags embedding;
  PipelineFlags pipeline;
  OpsFlags ops;  // logging and security, passed on to every process
  std::string model = "784-256-128-10";
  std::string dataset = "fashion-mnist";
  std::string data_dir;
  int batch = 128;
  int epochs = 12;
  int quorum = 0;
  uint64_t seed = 1;
  int64_t max_steps = 0;
  std::string memory_budget;
  std::string init_from;
  std::string export_dir;
  int64_t bucket_elements = 0;
  int64_t digest_every = 0;
  int64_t ring_full_table_rows = 0;
  std::string compression = "none";
  bool error_feedback = true;
  bool finalize_on_push = true;
  bool sum_on_arrival = false;
  bool pack_chunks = true;  // PS: tensors share chunks
  // Ring and hybrid: who writes the ring checkpoints (all or rank0).
  std::string ring_checkpoint_writers = "all";
  bool ring_shard_optimizer_state = false;  // ring: ZeRO stage 1
  std::string chaos;
  int min_workers = 1;
  // Passed to the coordinator only when given (its defaults otherwise).
  std::optional<int64_t> checkpoint_every;
  std::optional<double> state_sync_interval;
  std::optional<double> checkpoint_wait_limit;
  std::optional<double> heartbeat_timeout;
  std::optional<double> heartbeat_interval;
  std::string metrics_jsonl;
  std::string tensorboard_dir;
  std::string link_bandwidth;
  std::string link_latency;
  CLI::Option* model_flag = nullptr;  // set by AddLocalFlags
};

// Adds every `ferry local` flag to `local` (its subcommand), bound to
// `line`, which must outlive the parse.
void AddLocalFlags(CLI::App& local, LocalCommandLine& line);

// The launcher's options: flags checked (optimizer, chaos plan, link
// limits, security files, the model against the mode and the dataset,
// metrics paths), the coordinator's job arguments built, paths made
// absolute. Installs the security flags for ferry local's own calls.
// INVALID_ARGUMENT (or the check's own code) naming the flag.
absl::StatusOr<LocalClusterOptions> ResolveLocalCommand(LocalCommandLine line);

// Runs the job; the process's exit code (errors printed as "ferry local:
// ...").
int RunLocalCommand(const LocalCommandLine& line);

}  // namespace ferry

#endif  // FERRY_CLIENT_LOCAL_COMMAND_H_

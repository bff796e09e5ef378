// `ferry cost`: prints the cost model's prediction (client/cost_model.h) for
// PS and ring all-reduce side by side, which one wins, and the crossovers.
// With --pipeline-stages P > 1 it prints the pipeline-parallel job instead
// (client/pipeline_cost_command.h). For a DLRM (`--model dlrm` or a JSON of
// kind "dlrm") it prints the sparse
// model's three modes instead (client/sparse_cost_model.h): PS, ring
// all-gather of the touched rows, ring all-reduce of the full tables; with
// --sweep, a table over one quantity and where the modes cross over.
#ifndef FERRY_CLIENT_COST_COMMAND_H_
#define FERRY_CLIENT_COST_COMMAND_H_

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "client/cost_model.h"
#include "common/cli_flags.h"

namespace ferry {

struct CostFlags {
  std::string model = "fashion-mlp";
  int workers = 4;
  int shards = 2;
  int partitions = 1;  // PS: logical shards per shard process
  std::string bandwidth = "10Gbit";
  std::string latency = "50us";
  std::string compute = "0";
  // A ferry local --summary-json whose measured compute per worker step
  // replaces `compute` ("": none).
  std::string compute_from;
  std::string overhead = "0";
  std::string compression = "none";
  bool colocated = false;
  // Ring members on one host: their shared-memory links' bandwidth ("0":
  // network links, --bandwidth and --latency).
  std::string same_host_link = "0";
  // The optimizer whose state the memory estimate counts (sgd, momentum,
  // adam, ...: common/optimizer_config.h).
  std::string optimizer = "momentum";
  int64_t bucket_elements = 25 * 1024 * 1024 / 4;
  int64_t max_chunk_elements = 256 * 1024;
  bool pack_chunks = true;
  bool json = false;
  // DLRM models only.
  std::string vocab_sizes;  // comma-separated, one per table; "": Criteo-like
  double zipf = 1.1;
  int64_t batch = 128;       // global
  uint64_t data_seed = 1;    // `ferry data ctr --seed`: the fields' empty rates
  bool no_empty = false;     // pure Zipf fields, no empty values
  double unique_ids = -1;    // measured, per step summed over workers
  std::string sweep;         // "", batch, table, zipf
  std::string sweep_values;  // comma-separated; "": the axis' defaults
  // Pipeline parallelism (client/pipeline_cost_model.h): > 1 stages.
  PipelineFlags pipeline;
};

// Adds the subcommand's flags to `cmd`.
void AddCostFlags(CLI::App& cmd, CostFlags& flags);

// Prints the prediction (a table, or JSON with flags.json). Returns the exit
// code: 0, or 2 for a bad flag value (the message names it).
int RunCost(const CostFlags& flags);

// Shared by the dense and the sparse command: "1.94 MB", "7.193 ms", and the
// link, compute and overhead flags into `in` (INVALID_ARGUMENT naming the
// flag).
std::string FormatBytes(double bytes);
std::string FormatMillis(double seconds);
absl::Status ParseCostTimes(const CostFlags& flags, CostInput& in);

}  // namespace ferry

#endif  // FERRY_CLIENT_COST_COMMAND_H_

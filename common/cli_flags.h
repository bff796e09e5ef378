// Command-line flags shared by ferry's programs (CLI11, header-only), kept in
// one place so `ferry-worker --standalone`, the coordinator and `ferry local`
// accept the same spellings and defaults.
#ifndef FERRY_COMMON_CLI_FLAGS_H_
#define FERRY_COMMON_CLI_FLAGS_H_

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "common/optimizer_config.h"

namespace ferry {

// Raw optimizer flags as typed; ToConfig() validates them.
struct OptimizerFlags {
  std::string optimizer = "momentum";
  double lr = 0.05;
  double momentum = 0.9;
  bool nesterov = true;
  double weight_decay = 5e-4;
  double beta1 = 0.9;
  double beta2 = 0.999;
  std::string schedule = "cosine";
  int64_t warmup_steps = 200;
  double min_lr_ratio = 0.0;
  int64_t step_size = 0;
  double gamma = 0.1;

  // INVALID_ARGUMENT naming the flag for an unknown name or a bad value.
  absl::StatusOr<OptimizerConfig> ToConfig() const;
};

void AddOptimizerFlags(CLI::App& app, OptimizerFlags& flags);

// The --embedding-* flags of DLRM models as typed (docs/sparse.md);
// model/embedding_options.h's ToEmbeddingOptions() validates them.
struct EmbeddingFlags {
  std::string optimizer = "adagrad";
  double lr = 0.05;  // kDefaultEmbeddingLr
  int admit_count = 1;
  int64_t ttl_steps = 0;
  int64_t max_mb = 0;
  double ftrl_beta = 1.0;
  double ftrl_l1 = 0.0;
  double ftrl_l2 = 0.0;

  // Whether any of them was on the command line (after parsing).
  bool given() const;

  std::vector<CLI::Option*> options;  // filled by AddEmbeddingFlags
};

// Adds the --embedding-* flags (group "Embedding tables (DLRM)").
void AddEmbeddingFlags(CLI::App& app, EmbeddingFlags& flags);

// The pipeline flags (docs/pipeline.md) as typed, shared by `ferry-worker
// --standalone`, the coordinator, `ferry local` and `ferry cost`;
// pipeline/pipeline_options.h's ParsePipelineFlags validates them.
struct PipelineFlags {
  int stages = 1;
  int micro_batches = 1;
  std::string schedule = "1f1b";
  std::string split;  // stage starts, e.g. "2,7"; empty: balanced
  std::string balance = "compute";

  // Whether any differs from its default.
  bool given() const;
  // The flags again as arguments, for a child process (empty when none
  // was given).
  std::vector<std::string> ToArgs() const;
};

// Adds --pipeline-stages, --micro-batches, --pipeline-schedule,
// --pipeline-split and --pipeline-balance (group "Pipeline parallelism").
// `where` ends --pipeline-stages' help: where and how the stages run.
void AddPipelineFlags(CLI::App& app, PipelineFlags& flags,
                      const std::string& where);

// Adds --worker-memory-budget (group "Pipeline parallelism"): the most one
// worker may hold for the model, e.g. 512MiB (pipeline/stage_memory.h
// ParseByteSize reads it). `what` ends the help: what is refused and where.
void AddWorkerMemoryBudgetFlag(CLI::App& app, std::string& budget,
                               const std::string& what);

// Makes every long option of `app` (and its subcommands) readable from an
// environment variable FERRY_<NAME> (dashes become underscores, upper case),
// e.g. --batch from FERRY_BATCH. A flag given on the command line wins.
void BindEnvironment(CLI::App& app);

}  // namespace ferry

#endif  // FERRY_COMMON_CLI_FLAGS_H_

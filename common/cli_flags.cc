#include "common/cli_flags.h"

#include <cctype>

#include "common/status_macros.h"

namespace ferry {

absl::StatusOr<OptimizerConfig> OptimizerFlags::ToConfig() const {
  OptimizerConfig config;
  ASSIGN_OR_RETURN(config.kind, ParseOptimizerKind(optimizer));
  config.lr = lr;
  config.momentum = momentum;
  config.nesterov = nesterov;
  config.weight_decay = weight_decay;
  config.beta1 = beta1;
  config.beta2 = beta2;
  ASSIGN_OR_RETURN(config.schedule.kind, ParseScheduleKind(schedule));
  config.schedule.warmup_steps = warmup_steps;
  config.schedule.min_lr_ratio = min_lr_ratio;
  config.schedule.step_size = step_size;
  config.schedule.gamma = gamma;
  if (config.schedule.kind != ScheduleKind::kCosine) {
    // total_steps is only meaningful for cosine; others ignore it.
    config.schedule.total_steps = 0;
  }
  RETURN_IF_ERROR(ValidateOptimizerConfig(
      config.schedule.kind == ScheduleKind::kCosine
          ? [&] { OptimizerConfig c = config; c.schedule.total_steps = 1; return c; }()
          : config));
  return config;
}

void AddOptimizerFlags(CLI::App& app, OptimizerFlags& f) {
  const std::string group = "Optimizer";
  app.add_option("--optimizer", f.optimizer, "sgd, momentum, adam or adamw")
      ->capture_default_str()
      ->group(group);
  app.add_option("--lr", f.lr, "peak learning rate")
      ->capture_default_str()
      ->group(group);
  app.add_option("--momentum", f.momentum, "momentum (momentum optimizer)")
      ->capture_default_str()
      ->group(group);
  app.add_option("--nesterov", f.nesterov, "Nesterov momentum (true/false)")
      ->capture_default_str()
      ->group(group);
  app.add_option("--weight-decay", f.weight_decay,
                 "L2 penalty (decoupled for adamw)")
      ->capture_default_str()
      ->group(group);
  app.add_option("--beta1", f.beta1, "Adam beta1")
      ->capture_default_str()
      ->group(group);
  app.add_option("--beta2", f.beta2, "Adam beta2")
      ->capture_default_str()
      ->group(group);
  app.add_option("--lr-schedule", f.schedule, "constant, cosine or step")
      ->capture_default_str()
      ->group(group);
  app.add_option("--warmup-steps", f.warmup_steps, "linear warm-up steps")
      ->capture_default_str()
      ->group(group);
  app.add_option("--min-lr-ratio", f.min_lr_ratio,
                 "cosine floor as a fraction of --lr")
      ->capture_default_str()
      ->group(group);
  app.add_option("--lr-step-size", f.step_size,
                 "step schedule: steps between decays")
      ->capture_default_str()
      ->group(group);
  app.add_option("--lr-gamma", f.gamma, "step schedule: decay factor")
      ->capture_default_str()
      ->group(group);
}

bool PipelineFlags::given() const {
  const PipelineFlags defaults;
  return stages != defaults.stages || micro_batches != defaults.micro_batches ||
         schedule != defaults.schedule || split != defaults.split ||
         balance != defaults.balance;
}

std::vector<std::string> PipelineFlags::ToArgs() const {
  if (!given()) return {};
  std::vector<std::string> args = {
      "--pipeline-stages",   std::to_string(stages),
      "--micro-batches",     std::to_string(micro_batches),
      "--pipeline-schedule", schedule,
      "--pipeline-balance",  balance};
  if (!split.empty()) args.insert(args.end(), {"--pipeline-split", split});
  return args;
}

void AddPipelineFlags(CLI::App& app, PipelineFlags& f,
                      const std::string& where) {
  const std::string group = "Pipeline parallelism";
  app.add_option("--pipeline-stages", f.stages,
                 "split the model into this many pipeline stages (" + where +
                     "; docs/pipeline.md)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(group);
  app.add_option("--micro-batches", f.micro_batches,
                 "pipeline: micro-batches per step of a replica (<= batch)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(group);
  app.add_option("--pipeline-schedule", f.schedule,
                 "pipeline: gpipe (all forwards, then all backwards) or 1f1b "
                 "(one forward one backward; fewer activations held)")
      ->capture_default_str()
      ->group(group);
  app.add_option("--pipeline-split", f.split,
                 "pipeline: the first layer of stages 1..P-1, e.g. 7 or 2,7 "
                 "(default: balanced by --pipeline-balance)")
      ->group(group);
  app.add_option("--pipeline-balance", f.balance,
                 "pipeline: what the default split evens out: compute "
                 "(estimated FLOPs) or params (parameter bytes)")
      ->capture_default_str()
      ->group(group);
}

void AddWorkerMemoryBudgetFlag(CLI::App& app, std::string& budget,
                               const std::string& what) {
  app.add_option("--worker-memory-budget", budget,
                 "what one worker may hold for the model (its pipeline "
                 "stage's parameters, gradients, optimizer state and "
                 "activations; the whole model with one stage), e.g. 512MiB, "
                 "16GiB: " +
                     what)
      ->group("Pipeline parallelism");
}

bool EmbeddingFlags::given() const {
  for (const CLI::Option* option : options) {
    if (option->count() > 0) return true;
  }
  return false;
}

void AddEmbeddingFlags(CLI::App& app, EmbeddingFlags& f) {
  const std::string group = "Embedding tables (DLRM)";
  const auto add = [&](CLI::Option* option) {
    f.options.push_back(option->capture_default_str()->group(group));
  };
  add(app.add_option("--embedding-optimizer", f.optimizer,
                     "DLRM: the embedding rows' row-wise optimizer: sgd, "
                     "adagrad (one accumulator per row) or ftrl")
          ->check(CLI::IsMember({"sgd", "adagrad", "ftrl"})));
  add(app.add_option("--embedding-lr", f.lr,
                     "DLRM: the embedding rows' learning rate (FTRL: alpha)"));
  add(app.add_option("--embedding-admit-count", f.admit_count,
                     "DLRM: an id gets a row once this many steps named it; "
                     "until then it reads as zeros (1: at once)"));
  add(app.add_option("--embedding-ttl-steps", f.ttl_steps,
                     "DLRM: evict rows unseen for this many steps (0: never)"));
  add(app.add_option("--embedding-max-mb", f.max_mb,
                     "DLRM: memory limit of the embedding rows in MiB (per "
                     "PS shard); the least recently used rows are evicted "
                     "past it (0: none)"));
  add(app.add_option("--embedding-ftrl-beta", f.ftrl_beta,
                     "DLRM, --embedding-optimizer ftrl: beta"));
  add(app.add_option("--embedding-ftrl-l1", f.ftrl_l1,
                     "DLRM, --embedding-optimizer ftrl: L1"));
  add(app.add_option("--embedding-ftrl-l2", f.ftrl_l2,
                     "DLRM, --embedding-optimizer ftrl: L2"));
}

void BindEnvironment(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    const std::string name = option->get_single_name();
    if (name.empty() || name == "help" || !option->get_lnames().size())
      continue;
    std::string env = "FERRY_";
    for (char c : name)
      env += c == '-' ? '_' : static_cast<char>(std::toupper(c));
    option->envname(env);
  }
  for (CLI::App* sub : app.get_subcommands({})) BindEnvironment(*sub);
}

}  // namespace ferry

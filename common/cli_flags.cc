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

// Optimizer and learning-rate schedule configuration, and the pure schedule
// function. Shared by the PS shards and the ring workers so both paths apply
// exactly the same update.
#ifndef FERRY_COMMON_OPTIMIZER_CONFIG_H_
#define FERRY_COMMON_OPTIMIZER_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace ferry {

enum class OptimizerKind { kSgd, kMomentum, kAdam, kAdamW };

// Buffers of the parameters' size the optimizer keeps as state: 0 SGD,
// 1 momentum, 2 Adam and AdamW.
int OptimizerStateBuffers(OptimizerKind kind);
enum class ScheduleKind { kConstant, kCosine, kStep };

struct LrSchedule {
  ScheduleKind kind = ScheduleKind::kConstant;
  int64_t warmup_steps = 0;   // linear ramp from lr/warmup_steps to lr
  int64_t total_steps = 0;    // cosine: steps until min_lr (required > 0)
  double min_lr_ratio = 0.0;  // cosine floor as a fraction of lr
  int64_t step_size = 0;      // step decay: multiply by gamma every step_size
  double gamma = 0.1;
};

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kSgd;
  double lr = 0.01;
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  LrSchedule schedule;
};

// "sgd", "momentum", "adam", "adamw". INVALID_ARGUMENT otherwise.
absl::StatusOr<OptimizerKind> ParseOptimizerKind(const std::string& text);
std::string OptimizerKindName(OptimizerKind kind);
// "constant", "cosine", "step". INVALID_ARGUMENT otherwise.
absl::StatusOr<ScheduleKind> ParseScheduleKind(const std::string& text);
std::string ScheduleKindName(ScheduleKind kind);

// INVALID_ARGUMENT with the offending field for a config that cannot train
// (lr <= 0 or not finite, betas outside [0,1), cosine without total_steps...).
absl::Status ValidateOptimizerConfig(const OptimizerConfig& config);

// Learning rate used for the update with 0-based index `step`.
double LearningRateAt(const OptimizerConfig& config, int64_t step);

// Fills in the schedule's total_steps from epochs and dataset size when the
// schedule needs it and it was left 0.
void ResolveScheduleLength(OptimizerConfig& config, int64_t steps_per_epoch,
                           int epochs);

}  // namespace ferry

#endif  // FERRY_COMMON_OPTIMIZER_CONFIG_H_

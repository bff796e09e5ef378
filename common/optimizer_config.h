// Optimizer and learning-rate schedule configuration, and the pure schedule
// function. Shared by the PS shards and the ring workers so both paths apply
// exactly the same update.
#ifndef FERRY_COMMON_OPTIMIZER_CONFIG_H_
#define FERRY_COMMON_OPTIMIZER_CONFIG_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

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

// Most learning rates one config's tables may hold together (8 MiB).
inline constexpr int64_t kMaxLrTableEntries = int64_t{1} << 20;

// A learning rate per update, as a torch lr_scheduler computes it: entry s
// is the rate of the update with 0-based index s; the last entry holds for
// every later update. Empty: no table.
using LrTable = std::vector<double>;

// A parameter group (torch.optim's param_groups): its own learning rate and
// weight decay over some of the job's tensors. The other settings (kind,
// momentum, betas, epsilon) are the config's.
struct ParamGroup {
  // The tensors' names as the job lists them (JobSpec.tensors) and their
  // element ranges [begin, end) in the job's flat buffer, resolved from the
  // names (proto/job_convert.h JobOptimizer); a range per tensor.
  std::vector<std::string> tensors;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  double lr = 0.01;
  double weight_decay = 0.0;
  // Non-empty: the group's rate per update (then `lr` is its first entry).
  // Empty: `lr` scaled as the config's schedule scales the config's lr.
  LrTable lr_by_step;
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
  // Non-empty: the rate per update of every element no group holds,
  // replacing `schedule` (then `lr` is its first entry).
  LrTable lr_by_step;
  // Elements of no group take lr / weight_decay above.
  std::vector<ParamGroup> groups;
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

// Learning rate used for the update with 0-based index `step` of the
// elements no group holds.
double LearningRateAt(const OptimizerConfig& config, int64_t step);
// The same for group `group` (an index into config.groups).
double GroupLearningRateAt(const OptimizerConfig& config, size_t group,
                           int64_t step);

// The rate of the first parameter group (of the elements of no group when
// there is none): the one a job's metrics report.
double FirstGroupLearningRateAt(const OptimizerConfig& config, int64_t step);

// The groups' element ranges that fall in [offset, offset + size) of the
// job's flat buffer, shifted to start at `offset`, sorted, and adjacent
// ranges of one group merged: what one optimizer over that range (a shard's
// slice, a ring member's whole buffer) updates with each group's settings.
struct GroupSpan {
  size_t begin = 0;
  size_t end = 0;
  size_t group = 0;
};
std::vector<GroupSpan> GroupSpansIn(const OptimizerConfig& config,
                                    int64_t offset, int64_t size);

// Fills in the schedule's total_steps from epochs and dataset size when the
// schedule needs it and it was left 0.
void ResolveScheduleLength(OptimizerConfig& config, int64_t steps_per_epoch,
                           int epochs);

// Async and SSP jobs apply one optimizer update per push, each of about
// global_batch / workers samples. So that --lr and the schedule mean the
// same in every mode (per step of the global batch):
//  - AsyncLrScale: the factor a push of `num_samples` applies the learning
//    rate with, num_samples / global_batch (the linear scaling rule); 1 when
//    global_batch <= 0 or num_samples <= 0.
//  - ScheduleInUpdates: the schedule's warm-up and step-decay lengths,
//    given in steps, multiplied by `updates_per_step` (the job's workers).
//    Tables of rates per update (lr_by_step) are left as they are.
double AsyncLrScale(int64_t num_samples, int64_t global_batch);
void ScheduleInUpdates(OptimizerConfig& config, int64_t updates_per_step);

}  // namespace ferry

#endif  // FERRY_COMMON_OPTIMIZER_CONFIG_H_

#include "common/optimizer_config.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "absl/strings/str_cat.h"

namespace ferry {

absl::StatusOr<OptimizerKind> ParseOptimizerKind(const std::string& text) {
  if (text == "sgd") return OptimizerKind::kSgd;
  if (text == "momentum") return OptimizerKind::kMomentum;
  if (text == "adam") return OptimizerKind::kAdam;
  if (text == "adamw") return OptimizerKind::kAdamW;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown optimizer '", text, "': expected sgd, momentum, adam or adamw"));
}

std::string OptimizerKindName(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kMomentum:
      return "momentum";
    case OptimizerKind::kAdam:
      return "adam";
    case OptimizerKind::kAdamW:
      return "adamw";
  }
  return "unknown";
}

absl::StatusOr<ScheduleKind> ParseScheduleKind(const std::string& text) {
  if (text == "constant") return ScheduleKind::kConstant;
  if (text == "cosine") return ScheduleKind::kCosine;
  if (text == "step") return ScheduleKind::kStep;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown lr schedule '", text, "': expected constant, cosine or step"));
}

std::string ScheduleKindName(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kConstant:
      return "constant";
    case ScheduleKind::kCosine:
      return "cosine";
    case ScheduleKind::kStep:
      return "step";
  }
  return "unknown";
}

absl::Status ValidateOptimizerConfig(const OptimizerConfig& c) {
  auto bad = [](const std::string& what) {
    return absl::InvalidArgumentError("optimizer: " + what);
  };
  if (!std::isfinite(c.lr) || c.lr <= 0)
    return bad("lr must be finite and > 0");
  if (!std::isfinite(c.weight_decay) || c.weight_decay < 0) {
    return bad("weight_decay must be finite and >= 0");
  }
  if (c.momentum < 0 || c.momentum >= 1)
    return bad("momentum must be in [0, 1)");
  if (c.beta1 < 0 || c.beta1 >= 1) return bad("beta1 must be in [0, 1)");
  if (c.beta2 < 0 || c.beta2 >= 1) return bad("beta2 must be in [0, 1)");
  if (!(c.epsilon > 0)) return bad("epsilon must be > 0");
  const LrSchedule& s = c.schedule;
  if (s.warmup_steps < 0) return bad("warmup_steps must be >= 0");
  if (s.kind == ScheduleKind::kCosine && s.total_steps <= 0) {
    return bad("cosine schedule needs total_steps > 0");
  }
  if (s.min_lr_ratio < 0 || s.min_lr_ratio > 1)
    return bad("min_lr_ratio must be in [0, 1]");
  if (s.kind == ScheduleKind::kStep && (s.step_size <= 0 || !(s.gamma > 0))) {
    return bad("step schedule needs step_size > 0 and gamma > 0");
  }
  return absl::OkStatus();
}

double LearningRateAt(const OptimizerConfig& config, int64_t step) {
  const LrSchedule& s = config.schedule;
  if (step < s.warmup_steps) {
    return config.lr * static_cast<double>(step + 1) / s.warmup_steps;
  }
  switch (s.kind) {
    case ScheduleKind::kConstant:
      return config.lr;
    case ScheduleKind::kCosine: {
      const int64_t span = std::max<int64_t>(1, s.total_steps - s.warmup_steps);
      const double progress =
          std::min(1.0, static_cast<double>(step - s.warmup_steps) / span);
      const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
      return config.lr * (s.min_lr_ratio + (1.0 - s.min_lr_ratio) * cosine);
    }
    case ScheduleKind::kStep:
      return config.lr *
             std::pow(s.gamma, static_cast<double>((step - s.warmup_steps) /
                                                   s.step_size));
  }
  return config.lr;
}

void ResolveScheduleLength(OptimizerConfig& config, int64_t steps_per_epoch,
                           int epochs) {
  if (config.schedule.kind == ScheduleKind::kCosine &&
      config.schedule.total_steps <= 0) {
    config.schedule.total_steps =
        std::max<int64_t>(1, steps_per_epoch * epochs);
  }
}

int OptimizerStateBuffers(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return 0;
    case OptimizerKind::kMomentum:
      return 1;
    case OptimizerKind::kAdam:
    case OptimizerKind::kAdamW:
      return 2;
  }
  return 0;
}

}  // namespace ferry

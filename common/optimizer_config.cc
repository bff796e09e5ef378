#include "common/optimizer_config.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

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

namespace {

absl::Status ValidateLrTable(const LrTable& table, const std::string& whose) {
  for (size_t i = 0; i < table.size(); ++i) {
    if (!std::isfinite(table[i]) || table[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer: ", whose, " learning rate of update ", i,
                       " is ", table[i], "; it must be finite and >= 0"));
    }
  }
  return absl::OkStatus();
}

// The groups' settings and ranges (disjoint), and the tables' sizes.
absl::Status ValidateGroupsAndTables(const OptimizerConfig& c) {
  int64_t entries = static_cast<int64_t>(c.lr_by_step.size());
  RETURN_IF_ERROR(ValidateLrTable(c.lr_by_step, "the"));
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (size_t g = 0; g < c.groups.size(); ++g) {
    const ParamGroup& group = c.groups[g];
    const std::string whose = absl::StrCat("group ", g, "'s");
    if (!std::isfinite(group.lr) || group.lr < 0 ||
        (group.lr == 0 && group.lr_by_step.empty())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer: ", whose, " lr ", group.lr, " must be finite and > 0"));
    }
    if (!std::isfinite(group.weight_decay) || group.weight_decay < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer: ", whose, " weight_decay ",
                       group.weight_decay, " must be finite and >= 0"));
    }
    RETURN_IF_ERROR(ValidateLrTable(group.lr_by_step, whose));
    entries += static_cast<int64_t>(group.lr_by_step.size());
    for (const auto& [begin, end] : group.ranges) {
      if (begin < 0 || end <= begin) {
        return absl::InvalidArgumentError(
            absl::StrCat("optimizer: ", whose, " range [", begin, ", ", end,
                         ") is empty or negative"));
      }
      ranges.emplace_back(begin, end);
    }
  }
  if (entries > kMaxLrTableEntries) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: the learning-rate tables hold ", entries,
                     " rates, at most ", kMaxLrTableEntries, " are allowed"));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer: elements [", ranges[i].first, ", ",
                       std::min(ranges[i].second, ranges[i - 1].second),
                       ") are in two parameter groups"));
    }
  }
  return absl::OkStatus();
}

double TableAt(const LrTable& table, int64_t step) {
  const int64_t last = static_cast<int64_t>(table.size()) - 1;
  return table[static_cast<size_t>(std::clamp<int64_t>(step, 0, last))];
}

}  // namespace

absl::Status ValidateOptimizerConfig(const OptimizerConfig& c) {
  auto bad = [](const std::string& what) {
    return absl::InvalidArgumentError("optimizer: " + what);
  };
  // A table may start at 0 (a warm-up from 0); a fixed rate may not.
  if (!std::isfinite(c.lr) || c.lr < 0 || (c.lr == 0 && c.lr_by_step.empty()))
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
  return ValidateGroupsAndTables(c);
}

namespace {

// `lr` under `schedule` at the update with 0-based index `step`.
double ScheduledRate(const LrSchedule& s, double lr, int64_t step) {
  if (step < s.warmup_steps) {
    return lr * static_cast<double>(step + 1) / s.warmup_steps;
  }
  switch (s.kind) {
    case ScheduleKind::kConstant:
      return lr;
    case ScheduleKind::kCosine: {
      const int64_t span = std::max<int64_t>(1, s.total_steps - s.warmup_steps);
      const double progress =
          std::min(1.0, static_cast<double>(step - s.warmup_steps) / span);
      const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
      return lr * (s.min_lr_ratio + (1.0 - s.min_lr_ratio) * cosine);
    }
    case ScheduleKind::kStep:
      return lr * std::pow(s.gamma, static_cast<double>(
                                        (step - s.warmup_steps) / s.step_size));
  }
  return lr;
}

}  // namespace

double LearningRateAt(const OptimizerConfig& config, int64_t step) {
  if (!config.lr_by_step.empty()) return TableAt(config.lr_by_step, step);
  return ScheduledRate(config.schedule, config.lr, step);
}

double GroupLearningRateAt(const OptimizerConfig& config, size_t group,
                           int64_t step) {
  const ParamGroup& g = config.groups[group];
  if (!g.lr_by_step.empty()) return TableAt(g.lr_by_step, step);
  return ScheduledRate(config.schedule, g.lr, step);
}

double FirstGroupLearningRateAt(const OptimizerConfig& config, int64_t step) {
  return config.groups.empty() ? LearningRateAt(config, step)
                               : GroupLearningRateAt(config, 0, step);
}

std::vector<GroupSpan> GroupSpansIn(const OptimizerConfig& config,
                                    int64_t offset, int64_t size) {
  std::vector<GroupSpan> spans;
  for (size_t g = 0; g < config.groups.size(); ++g) {
    for (const auto& [begin, end] : config.groups[g].ranges) {
      const int64_t b = std::max(begin, offset);
      const int64_t e = std::min(end, offset + size);
      if (b < e) {
        spans.push_back({static_cast<size_t>(b - offset),
                         static_cast<size_t>(e - offset), g});
      }
    }
  }
  std::sort(
      spans.begin(), spans.end(),
      [](const GroupSpan& a, const GroupSpan& b) { return a.begin < b.begin; });
  // Tensors of one group that follow each other are one span: one update
  // call (one kernel launch on a GPU) per run of them, not per tensor.
  std::vector<GroupSpan> merged;
  for (const GroupSpan& span : spans) {
    if (!merged.empty() && merged.back().end == span.begin &&
        merged.back().group == span.group) {
      merged.back().end = span.end;
    } else {
      merged.push_back(span);
    }
  }
  return merged;
}

void ResolveScheduleLength(OptimizerConfig& config, int64_t steps_per_epoch,
                           int epochs) {
  if (config.schedule.kind == ScheduleKind::kCosine &&
      config.schedule.total_steps <= 0) {
    config.schedule.total_steps =
        std::max<int64_t>(1, steps_per_epoch * epochs);
  }
}

double AsyncLrScale(int64_t num_samples, int64_t global_batch) {
  if (global_batch <= 0 || num_samples <= 0) return 1.0;
  return static_cast<double>(num_samples) / static_cast<double>(global_batch);
}

void ScheduleInUpdates(OptimizerConfig& config, int64_t updates_per_step) {
  if (updates_per_step <= 1) return;
  config.schedule.warmup_steps *= updates_per_step;
  config.schedule.step_size *= updates_per_step;
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

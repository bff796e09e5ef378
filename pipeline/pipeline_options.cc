#include "pipeline/pipeline_options.h"

#include "absl/strings/str_cat.h"

namespace ferry {

absl::StatusOr<PipelineOptions> ParsePipelineFlags(const PipelineFlags& f) {
  const auto named = [](const char* flag, const absl::Status& s) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", s.message()));
  };
  PipelineOptions o;
  o.stages = f.stages;
  o.micro_batches = f.micro_batches;
  absl::StatusOr<PipelineSchedule> schedule = ParsePipelineSchedule(f.schedule);
  if (!schedule.ok()) return named("--pipeline-schedule", schedule.status());
  o.schedule = *schedule;
  absl::StatusOr<StageBalance> balance = ParseStageBalance(f.balance);
  if (!balance.ok()) return named("--pipeline-balance", balance.status());
  o.balance = *balance;
  if (!f.split.empty()) {
    absl::StatusOr<std::vector<int>> split = ParseStageStarts(f.split);
    if (!split.ok()) return named("--pipeline-split", split.status());
    o.split = *split;
  }
  return o;
}

}  // namespace ferry

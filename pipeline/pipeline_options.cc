#include "pipeline/pipeline_options.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

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

absl::StatusOr<PipelineOptions> JobPipelineOptions(const v1::JobSpec& job) {
  PipelineOptions o;
  o.stages = std::max(1, job.pipeline_stages());
  o.micro_batches = std::max(1, job.micro_batches());
  if (!job.pipeline_schedule().empty()) {
    ASSIGN_OR_RETURN(o.schedule,
                     ParsePipelineSchedule(job.pipeline_schedule()));
  }
  if (!job.pipeline_balance().empty()) {
    ASSIGN_OR_RETURN(o.balance, ParseStageBalance(job.pipeline_balance()));
  }
  o.split.assign(job.pipeline_split().begin(), job.pipeline_split().end());
  return o;
}

}  // namespace ferry

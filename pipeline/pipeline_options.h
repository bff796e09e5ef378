// A pipeline's settings, validated from the shared flags
// (common/cli_flags.h PipelineFlags) or read from a job's spec.
#ifndef FERRY_PIPELINE_PIPELINE_OPTIONS_H_
#define FERRY_PIPELINE_PIPELINE_OPTIONS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "common/cli_flags.h"
#include "model/pipeline_split.h"
#include "pipeline/pipeline_schedule.h"

namespace ferry {

struct PipelineOptions {
  int stages = 1;  // P
  int micro_batches = 1;
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  std::vector<int> split;  // stage starts; empty: balanced by `balance`
  StageBalance balance = StageBalance::kCompute;
};

// INVALID_ARGUMENT naming the flag for an unknown schedule or balance, or a
// split that is not a list of layer indices.
absl::StatusOr<PipelineOptions> ParsePipelineFlags(const PipelineFlags& f);

}  // namespace ferry

#endif  // FERRY_PIPELINE_PIPELINE_OPTIONS_H_

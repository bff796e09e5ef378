// A pipeline's settings, validated from the shared flags
// (common/cli_flags.h PipelineFlags) or read from a job's spec.
#ifndef FERRY_PIPELINE_PIPELINE_OPTIONS_H_
#define FERRY_PIPELINE_PIPELINE_OPTIONS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "common/cli_flags.h"
#include "ferry/v1/common.pb.h"
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

// The pipeline fields of a job (JobSpec.pipeline_*; empty schedule and
// balance: the defaults, 0 stages or micro-batches: 1). INVALID_ARGUMENT
// for an unknown schedule or balance.
absl::StatusOr<PipelineOptions> JobPipelineOptions(const v1::JobSpec& job);

}  // namespace ferry

#endif  // FERRY_PIPELINE_PIPELINE_OPTIONS_H_

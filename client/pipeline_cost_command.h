// `ferry cost --pipeline-stages P`: the pipeline-parallel job's predicted
// step (client/pipeline_cost_model.h) per stage, its bubble, and the same
// workers as plain data parallelism (ring and PS over the whole model) for
// comparison.
#ifndef FERRY_CLIENT_PIPELINE_COST_COMMAND_H_
#define FERRY_CLIENT_PIPELINE_COST_COMMAND_H_

#include "absl/status/status.h"
#include "client/cost_command.h"

namespace ferry {

// Prints the table (or JSON with flags.json). INVALID_ARGUMENT naming the
// flag for a bad value.
absl::Status RunPipelineCost(const CostFlags& flags);

}  // namespace ferry

#endif  // FERRY_CLIENT_PIPELINE_COST_COMMAND_H_

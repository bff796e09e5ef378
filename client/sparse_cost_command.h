// `ferry cost` for a DLRM (`--model dlrm` or a JSON of kind "dlrm"): the
// sparse cost model's three modes (client/sparse_cost_model.h) side by side,
// or with --sweep a table over one quantity and where the modes cross over.
#ifndef FERRY_CLIENT_SPARSE_COST_COMMAND_H_
#define FERRY_CLIENT_SPARSE_COST_COMMAND_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/cost_command.h"
#include "client/sparse_cost_model.h"

namespace ferry {

// Prints the prediction or the sweep (a table, or JSON with flags.json).
// INVALID_ARGUMENT naming the flag for a bad value or a flag of dense models.
absl::Status RunSparseCost(const CostFlags& flags);

// The sparse cost model's input as `ferry cost --model dlrm` builds it from
// its flags (`ferry bench compare` predicts its DLRM runs with it).
// INVALID_ARGUMENT naming the flag for a bad value.
absl::StatusOr<SparseCostInput> SparseCostInputFromFlags(
    const CostFlags& flags);

}  // namespace ferry

#endif  // FERRY_CLIENT_SPARSE_COST_COMMAND_H_

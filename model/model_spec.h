// What a model is, without a backend: its spec string, parameter layout and
// initial parameters, as pure functions. Servers, the coordinator and the CLI
// (cost model) use these; only the processes that compute build the model
// itself on a ComputeBackend (model/mlp.h).
#ifndef FERRY_MODEL_MODEL_SPEC_H_
#define FERRY_MODEL_MODEL_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/parameter_layout.h"

namespace ferry {

// Parses "784-256-128-10": at least two positive sizes. INVALID_ARGUMENT
// otherwise, naming the offending part.
absl::StatusOr<std::vector<int>> ParseMlpSpec(const std::string& spec);
std::string MlpSpecString(const std::vector<int>& sizes);

// The MLP's flat layout: for each layer l, "fc<l>.weight" [out, in] then
// "fc<l>.bias" [out]. INVALID_ARGUMENT for fewer than two sizes or a size
// <= 0.
absl::StatusOr<ParameterLayout> MlpLayout(const std::vector<int>& sizes);

// Deterministic initial parameters: He-normal weights for ReLU layers,
// Xavier-normal for the last layer, zero biases. The same seed gives
// bit-identical parameters on every process and platform.
// REQUIRES: `layout` == MlpLayout(sizes).
std::vector<float> MlpInitialParameters(const std::vector<int>& sizes,
                                        const ParameterLayout& layout,
                                        uint64_t seed);

}  // namespace ferry

#endif  // FERRY_MODEL_MODEL_SPEC_H_

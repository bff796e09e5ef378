// The model's parameters as named fp32 tensors packed back to back in one flat
// buffer, in model order. The flat buffer is the unit every other piece works
// on: PS shards own ranges of it, ring buckets are ranges of it, optimizers
// update ranges of it elementwise.
//
// Immutable after construction; safe to share across threads.
#ifndef FERRY_MODEL_PARAMETER_LAYOUT_H_
#define FERRY_MODEL_PARAMETER_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ferry {

struct TensorSlot {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // first element in the flat buffer
  int64_t numel = 0;
};

class ParameterLayout {
 public:
  struct TensorDef {
    std::string name;
    std::vector<int64_t> shape;
  };

  ParameterLayout() = default;

  // INVALID_ARGUMENT on an empty or duplicate name or a negative dimension;
  // RESOURCE_EXHAUSTED beyond kMaxTensorsPerJob tensors or kMaxModelElements
  // elements in all (common/peer_limits.h).
  static absl::StatusOr<ParameterLayout> Create(
      const std::vector<TensorDef>& tensors);

  const std::vector<TensorSlot>& tensors() const { return tensors_; }
  int64_t total_elements() const { return total_; }
  int64_t total_bytes() const { return total_ * 4; }
  std::vector<int64_t> TensorSizes() const;

  // Index of the tensor named `name`; NOT_FOUND when there is none.
  absl::StatusOr<int> IndexOf(const std::string& name) const;

 private:
  std::vector<TensorSlot> tensors_;
  int64_t total_ = 0;
};

}  // namespace ferry

#endif  // FERRY_MODEL_PARAMETER_LAYOUT_H_

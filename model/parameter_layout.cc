#include "model/parameter_layout.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/peer_limits.h"

namespace ferry {

absl::StatusOr<ParameterLayout> ParameterLayout::Create(
    const std::vector<TensorDef>& tensors) {
  ParameterLayout layout;
  if (static_cast<int64_t>(tensors.size()) > kMaxTensorsPerJob) {
    return LimitExceeded("the number of parameter tensors", tensors.size(),
                         kMaxTensorsPerJob);
  }
  absl::flat_hash_map<std::string, int> seen;
  for (const TensorDef& def : tensors) {
    if (def.name.empty()) {
      return absl::InvalidArgumentError("parameter tensor with an empty name");
    }
    if (!seen.emplace(def.name, 0).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("duplicate parameter tensor name '", def.name, "'"));
    }
    int64_t numel = 1;
    for (int64_t dim : def.shape) {
      if (dim < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor '", def.name, "' has a negative dimension"));
      }
      // Saturates above the limit, so a huge shape cannot overflow.
      numel = (dim != 0 && numel > kMaxModelElements / dim)
                  ? kMaxModelElements + 1
                  : numel * dim;
    }
    if (numel > kMaxModelElements - layout.total_) {
      return LimitExceeded(
          absl::StrCat("the number of parameter elements (through tensor '",
                       def.name, "')"),
          numel > kMaxModelElements ? numel : layout.total_ + numel,
          kMaxModelElements);
    }
    layout.tensors_.push_back(
        TensorSlot{def.name, def.shape, layout.total_, numel});
    layout.total_ += numel;
  }
  return layout;
}

std::vector<int64_t> ParameterLayout::TensorSizes() const {
  std::vector<int64_t> sizes;
  sizes.reserve(tensors_.size());
  for (const TensorSlot& t : tensors_) sizes.push_back(t.numel);
  return sizes;
}

absl::StatusOr<int> ParameterLayout::IndexOf(const std::string& name) const {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (tensors_[i].name == name) return static_cast<int>(i);
  }
  return absl::NotFoundError(
      absl::StrCat("no parameter tensor named '", name, "'"));
}

}  // namespace ferry

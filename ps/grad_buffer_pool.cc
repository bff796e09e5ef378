#include "ps/grad_buffer_pool.h"

#include <utility>

namespace ferry {

std::optional<std::vector<float>> GradBufferPool::TakeFree() {
  if (free_.empty()) return std::nullopt;
  std::vector<float> buffer = std::move(free_.back());
  free_.pop_back();
  return buffer;
}

void GradBufferPool::Recycle(std::vector<float> buffer) {
  if (free_.size() < kMaxFree && buffer.size() == buffer_size_) {
    free_.push_back(std::move(buffer));
  }
}

}  // namespace ferry

// GradBufferPool: gradient buffers of a PS shard's slice size, kept once
// the push they held was applied or dropped, for the next push (a large
// slice is otherwise fresh, page-faulting memory on every push).
//
// Contract: TakeFree() hands out a kept buffer (its contents unspecified)
// or nothing; Recycle() keeps at most kMaxFree buffers, and only those of
// the pool's buffer size (others are freed). Not thread-safe: the shard
// guards it with its mutex and allocates a new buffer outside it.
#ifndef FERRY_PS_GRAD_BUFFER_POOL_H_
#define FERRY_PS_GRAD_BUFFER_POOL_H_

#include <cstddef>
#include <optional>
#include <vector>

namespace ferry {

class GradBufferPool {
 public:
  // Enough for every contributor of a step plus pushes in flight.
  static constexpr size_t kMaxFree = 8;

  explicit GradBufferPool(size_t buffer_size) : buffer_size_(buffer_size) {}

  std::optional<std::vector<float>> TakeFree();
  void Recycle(std::vector<float> buffer);

  size_t free_buffers() const { return free_.size(); }

 private:
  const size_t buffer_size_;
  std::vector<std::vector<float>> free_;
};

}  // namespace ferry

#endif  // FERRY_PS_GRAD_BUFFER_POOL_H_

#include "ring/ring_payload.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace ferry {

void ApplyPacked(const char* src, size_t n, float* dst, RecvOp op) {
  if (op == RecvOp::kCopy) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, src + i * sizeof(float), sizeof(float));
    dst[i] += v;
  }
}

RingPayload::RingPayload(std::string bytes)
    : bytes_(std::move(bytes)), size_(bytes_.size()) {}

RingPayload::RingPayload(std::vector<absl::string_view> pieces,
                         std::shared_ptr<const void> owner)
    : owner_(std::move(owner)) {
  for (absl::string_view piece : pieces) {
    if (piece.empty()) continue;
    size_ += piece.size();
    pieces_.push_back(piece);
  }
  if (pieces_.empty()) owner_.reset();
}

void RingPayload::ApplyFloats(float* dst, RecvOp op) const {
  if (pieces_.empty()) {
    ApplyPacked(bytes_.data(), bytes_.size() / sizeof(float), dst, op);
    return;
  }
  char carry[sizeof(float)];
  size_t carried = 0;  // bytes of a float split between pieces
  for (absl::string_view piece : pieces_) {
    const char* p = piece.data();
    size_t left = piece.size();
    if (carried > 0) {
      const size_t take = std::min(sizeof(float) - carried, left);
      std::memcpy(carry + carried, p, take);
      carried += take;
      p += take;
      left -= take;
      if (carried < sizeof(float)) continue;
      ApplyPacked(carry, 1, dst++, op);
      carried = 0;
    }
    const size_t whole = left / sizeof(float);
    ApplyPacked(p, whole, dst, op);
    dst += whole;
    carried = left - whole * sizeof(float);
    std::memcpy(carry, p + whole * sizeof(float), carried);
  }
}

std::string RingPayload::TakeString() && {
  if (pieces_.empty()) return std::move(bytes_);
  std::string bytes;
  bytes.reserve(size_);
  for (absl::string_view piece : pieces_) {
    bytes.append(piece.data(), piece.size());
  }
  return bytes;
}

}  // namespace ferry

// RingPayload: the data of one ring message as the receiver holds it until
// the collective takes it (ring/ring_mailbox.h): one string, or pieces of
// memory kept alive by an owner (the gRPC slices the message arrived in,
// ring/ring_wire.h), so that its floats are added or copied into the
// collective's buffer straight from where they arrived, without a copy in
// between. No gRPC types.
//
// Thread safety: a payload is used by one thread at a time; the owner is
// released when the last copy of the payload is destroyed.
#ifndef FERRY_RING_RING_PAYLOAD_H_
#define FERRY_RING_RING_PAYLOAD_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "ring/ring_transport.h"

namespace ferry {

// dst[i] = or += the i-th of the `n` floats packed at `src` (any
// alignment).
void ApplyPacked(const char* src, size_t n, float* dst, RecvOp op);

class RingPayload {
 public:
  RingPayload() = default;
  explicit RingPayload(std::string bytes);
  // The concatenation of `pieces`, whose memory `owner` keeps valid.
  RingPayload(std::vector<absl::string_view> pieces,
              std::shared_ptr<const void> owner);

  size_t size() const { return size_; }
  // How many pieces the bytes lie in (1 for a string).
  size_t pieces() const { return pieces_.empty() ? 1 : pieces_.size(); }

  // dst[i] = or += float i of the payload, for every one of its
  // size() / 4 floats, read piece by piece (a float split between two
  // pieces is joined first). REQUIRES: size() % sizeof(float) == 0.
  void ApplyFloats(float* dst, RecvOp op) const;

  // The bytes as one string: moved out when held as one, else copied
  // (an opaque payload its decoder wants whole).
  std::string TakeString() &&;

 private:
  std::string bytes_;                      // when pieces_ is empty
  std::vector<absl::string_view> pieces_;  // else the bytes, in order
  std::shared_ptr<const void> owner_;      // keeps pieces_ valid
  size_t size_ = 0;
};

}  // namespace ferry

#endif  // FERRY_RING_RING_PAYLOAD_H_

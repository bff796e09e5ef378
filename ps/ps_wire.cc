#include "ps/ps_wire.h"

#include <cstring>
#include <vector>

#include "absl/container/inlined_vector.h"

namespace ferry {
namespace {
// Protobuf wire format, just what PushRequest and PullResponse need.
constexpr int kPushChunkIdField = 2, kPushDataField = 3, kPushEncodingField = 4,
              kPushAbsentField = 6;  // PushRequest
constexpr int kPullVersionField = 1, kPullChunkIdField = 2,
              kPullDataField = 3;  // PullResponse

}  // namespace

// A PushRequest {chunk_id, data, encoding} whose data is `data` (referenced,
// not copied): the encoded fields before the data, the data slice, then the
// encoding (field order, as protobuf serializes it).
grpc::ByteBuffer ChunkMessage(int32_t chunk_id, const grpc::Slice& data,
                              int encoding, absl::Span<const int64_t> absent) {
  uint8_t prefix[32];
  uint8_t* p = prefix;
  if (chunk_id != 0) {  // proto3 omits zero scalars
    *p++ = kPushChunkIdField << 3 | kWireVarint;
    p = PutVarint(static_cast<uint64_t>(static_cast<int64_t>(chunk_id)), p);
  }
  if (data.size() > 0) {  // proto3 omits empty bytes (ENCODING_ZEROS)
    *p++ = kPushDataField << 3 | kWireLength;
    p = PutVarint(data.size(), p);
  }
  if (encoding == 0 && absent.empty()) {
    const grpc::Slice slices[2] = {grpc::Slice(prefix, p - prefix), data};
    return grpc::ByteBuffer(slices, 2);
  }
  // The fields after the data: the encoding, then the absent ranges packed
  // (proto3's encoding of a repeated scalar), each varint at most 10 bytes.
  // Inline for the common case (an encoding, no ranges): no allocation.
  absl::InlinedVector<uint8_t, 32> suffix(16 + 10 * (absent.size() + 2));
  uint8_t* q = suffix.data();
  if (encoding != 0) {
    *q++ = kPushEncodingField << 3 | kWireVarint;
    q = PutVarint(static_cast<uint64_t>(static_cast<int64_t>(encoding)), q);
  }
  if (!absent.empty()) {
    std::vector<uint8_t> values(10 * absent.size());
    uint8_t* v = values.data();
    for (int64_t bound : absent) v = PutVarint(static_cast<uint64_t>(bound), v);
    const size_t length = static_cast<size_t>(v - values.data());
    *q++ = kPushAbsentField << 3 | kWireLength;
    q = PutVarint(length, q);
    std::memcpy(q, values.data(), length);
    q += length;
  }
  const grpc::Slice slices[3] = {grpc::Slice(prefix, p - prefix), data,
                                 grpc::Slice(suffix.data(), q - suffix.data())};
  return grpc::ByteBuffer(slices, 3);
}

bool ParsePullMessage(WireReader& in, PullMessage* out) {
  while (!in.done()) {
    uint64_t tag = 0;
    if (!in.ReadVarint(&tag) || (tag >> 3) == 0 || tag > 0xffffffffu) {
      return false;
    }
    const uint64_t field = tag >> 3;
    uint64_t value = 0;
    switch (tag & 7) {
      case kWireVarint:
        if (!in.ReadVarint(&value)) return false;
        if (field == kPullVersionField) {
          out->version = static_cast<int64_t>(value);
        } else if (field == kPullChunkIdField) {
          out->chunk_id = static_cast<int32_t>(static_cast<uint32_t>(value));
        }
        break;
      case kWireFixed64:
        if (!in.Skip(8)) return false;
        break;
      case kWireLength:
        if (!in.ReadVarint(&value)) return false;
        if (field == kPullDataField) {
          out->data_begin = in.position();
          out->data_size = static_cast<size_t>(value);
        }
        if (!in.Skip(value)) return false;
        break;
      case kWireFixed32:
        if (!in.Skip(4)) return false;
        break;
      default:
        return false;  // groups are not used by ferry.v1
    }
  }
  return true;
}

}  // namespace ferry

#include "ring/ring_wire.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "grpcpp/impl/codegen/proto_utils.h"
#include "proto/raw_wire.h"

namespace ferry {
namespace {

constexpr uint64_t kDataField = 5;

// What a wire payload's owner is (RingPayload::owner_of).
constexpr char kWireSlices = 0;

// The fast path: the message read in place. nullopt for whatever it does
// not take (a group, bytes that are malformed): protobuf decides those.
std::optional<RingWireMessage> ParseInPlace(const grpc::ByteBuffer& wire) {
  WireReader reader(wire);
  // Every field but the data, its bytes as they came: what protobuf
  // parses (the data field under another wire type is an unknown field to
  // protobuf, and is kept as one here).
  std::string head_bytes;
  std::optional<std::pair<size_t, uint64_t>> data;  // its offset and size
  while (!reader.done()) {
    const size_t field_start = reader.position();
    uint64_t key = 0;
    if (!reader.ReadVarint(&key) || (key >> 3) == 0) return std::nullopt;
    uint64_t n = 0;  // value bytes that follow
    switch (key & 7) {
      case kWireVarint:
        if (uint64_t v = 0; !reader.ReadVarint(&v)) return std::nullopt;
        break;
      case kWireFixed64:
        n = 8;
        break;
      case kWireFixed32:
        n = 4;
        break;
      case kWireLength:
        if (!reader.ReadVarint(&n)) return std::nullopt;
        break;
      default:
        return std::nullopt;  // groups
    }
    const size_t value_start = reader.position();
    if (!reader.Skip(n)) return std::nullopt;
    if ((key >> 3) == kDataField && (key & 7) == kWireLength) {
      data.emplace(value_start, n);
      continue;
    }
    const size_t length = reader.position() - field_start;
    head_bytes.resize(head_bytes.size() + length);
    reader.CopyOut(field_start, length,
                   head_bytes.data() + head_bytes.size() - length);
  }
  RingWireMessage message;
  if (!message.head.ParseFromString(head_bytes)) return std::nullopt;
  if (data.has_value()) {
    // The data's own slices (references to the received memory), viewed
    // once they sit where they stay.
    auto owner = std::make_shared<std::vector<grpc::Slice>>(
        reader.SliceRange(data->first, data->second));
    std::vector<absl::string_view> views;
    for (const grpc::Slice& s : *owner) {
      views.emplace_back(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    message.data =
        RingPayload(std::move(views), std::move(owner), &kWireSlices);
  }
  return message;
}

}  // namespace

const std::vector<grpc::Slice>* WireSlicesOf(const RingPayload& payload) {
  return static_cast<const std::vector<grpc::Slice>*>(
      payload.owner_of(&kWireSlices));
}

absl::StatusOr<RingWireMessage> ParseRingWire(const grpc::ByteBuffer& wire) {
  if (std::optional<RingWireMessage> fast = ParseInPlace(wire)) {
    return *std::move(fast);
  }
  // Protobuf's verdict, and a copy of the data when it parses.
  grpc::ByteBuffer copy(wire);  // references the slices
  v1::RingMessage whole;
  if (!grpc::GenericDeserialize<grpc::ProtoBufferReader,
                                google::protobuf::MessageLite>(&copy, &whole)
           .ok()) {
    return absl::InvalidArgumentError("ring message does not parse");
  }
  RingWireMessage message;
  message.data = RingPayload(std::move(*whole.mutable_data()));
  whole.clear_data();
  message.head = std::move(whole);
  return message;
}

}  // namespace ferry

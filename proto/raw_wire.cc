#include "proto/raw_wire.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "grpcpp/impl/codegen/proto_utils.h"

namespace ferry {

uint8_t* PutVarint(uint64_t value, uint8_t* out) {
  while (value >= 0x80) {
    *out++ = static_cast<uint8_t>(value | 0x80);
    value >>= 7;
  }
  *out++ = static_cast<uint8_t>(value);
  return out;
}

grpc::ByteBuffer SerializeMessage(
    const google::protobuf::MessageLite& message) {
  const grpc::Slice slice(message.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

absl::Status ParseStreamMessage(grpc::ByteBuffer& wire,
                                google::protobuf::MessageLite& out,
                                absl::string_view stream, int64_t index) {
  if (grpc::GenericDeserialize<grpc::ProtoBufferReader,
                               google::protobuf::MessageLite>(&wire, &out)
          .ok()) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("%s message %d does not parse", stream, index));
}

std::optional<std::vector<grpc::Slice>> ParseBytesFieldInPlace(
    const grpc::ByteBuffer& wire, uint64_t field,
    google::protobuf::MessageLite& head) {
  WireReader reader(wire);
  // Every other field, its bytes as they came: what protobuf parses (the
  // field under another wire type is an unknown field to protobuf, and is
  // kept as one here).
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
    if ((key >> 3) == field && (key & 7) == kWireLength) {
      data.emplace(value_start, n);
      continue;
    }
    const size_t length = reader.position() - field_start;
    head_bytes.resize(head_bytes.size() + length);
    reader.CopyOut(field_start, length,
                   head_bytes.data() + head_bytes.size() - length);
  }
  if (!head.ParseFromString(head_bytes)) return std::nullopt;
  if (!data.has_value()) return std::vector<grpc::Slice>();
  return reader.SliceRange(data->first, data->second);
}

}  // namespace ferry

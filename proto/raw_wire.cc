#include "proto/raw_wire.h"

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

}  // namespace ferry

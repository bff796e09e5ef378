#include "ring/ring_wire.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "google/protobuf/io/coded_stream.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "proto/raw_wire.h"

namespace ferry {
namespace {

constexpr uint64_t kDataField = 5;

// The fast path: the message read in place. nullopt for whatever it does
// not take (a group, bytes that are malformed): protobuf decides those.
std::optional<RingWireMessage> ParseInPlace(const grpc::ByteBuffer& wire) {
  RingWireMessage message;
  std::optional<std::vector<grpc::Slice>> data =
      ParseBytesFieldInPlace(wire, kDataField, message.head);
  if (!data.has_value()) return std::nullopt;
  if (!data->empty()) {
    // The data's own slices (references to the received memory), viewed
    // once they sit where they stay.
    auto owner = std::make_shared<std::vector<grpc::Slice>>(*std::move(data));
    std::vector<absl::string_view> views;
    for (const grpc::Slice& s : *owner) {
      views.emplace_back(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    message.data = RingPayload(std::move(views), std::move(owner));
  }
  return message;
}

}  // namespace

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

int64_t RingMessageWireBytes(const RingTag& tag, size_t payload_bytes,
                             bool encoded) {
  v1::RingMessage header;
  header.set_op_id(tag.op_id);
  header.set_stage(tag.stage);
  header.set_piece(tag.piece);
  header.set_encoded(encoded);
  const size_t data =
      payload_bytes == 0
          ? 0
          : 1 +
                google::protobuf::io::CodedOutputStream::VarintSize64(
                    payload_bytes) +
                payload_bytes;
  return static_cast<int64_t>(header.ByteSizeLong() + data);
}

}  // namespace ferry

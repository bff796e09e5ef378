// A RingMessage read from gRPC's receive buffer without copying its data:
// the ring peer service's parser (ring/ring_peer_service.cc). The small
// fields (hello, op, stage, piece, encoded) are parsed by protobuf from a
// copy of their few bytes; field 5, the data, is left where it arrived, as
// pieces of the message's slices (RingPayload), so a received float is
// read once, by the collective's add or copy into its buffer.
//
// Thread safety: stateless.
#ifndef FERRY_RING_RING_WIRE_H_
#define FERRY_RING_RING_WIRE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "ferry/v1/ring.pb.h"
#include "grpcpp/support/byte_buffer.h"
#include "ring/ring_payload.h"

namespace ferry {

struct RingWireMessage {
  v1::RingMessage head;  // every field but data (left empty)
  RingPayload data;      // field 5's bytes (the last occurrence wins)
};

// The message in `wire` (its slices are referenced, not copied: `wire` may
// be reused or destroyed afterwards). What the in-place reader does not
// take (groups, malformed bytes) protobuf parses whole, with a copy of the
// data, so a message is accepted exactly when protobuf accepts it.
// INVALID_ARGUMENT "ring message does not parse" otherwise.
absl::StatusOr<RingWireMessage> ParseRingWire(const grpc::ByteBuffer& wire);

// The wire size of the RingMessage (without a hello) that carries
// `payload_bytes` under `tag`: what a message counts in byte accounting,
// whichever way it travels (a shared-memory link counts as the stream
// would).
int64_t RingMessageWireBytes(const RingTag& tag, size_t payload_bytes,
                             bool encoded);

}  // namespace ferry

#endif  // FERRY_RING_RING_WIRE_H_

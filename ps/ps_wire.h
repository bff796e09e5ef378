// The PS messages that carry tensor data, in their canonical protobuf
// encoding over raw grpc::ByteBuffers (proto/raw_wire.h): a PushRequest
// chunk whose data slice is referenced, not copied, and a PullResponse
// parsed with its data left in the received slices.
#ifndef FERRY_PS_PS_WIRE_H_
#define FERRY_PS_PS_WIRE_H_

#include <cstdint>

#include "absl/types/span.h"
#include "grpcpp/grpcpp.h"
#include "proto/raw_wire.h"

namespace ferry {

// A PushRequest {chunk_id, data, encoding, absent} whose data is `data`
// (referenced). `encoding` is a ferry.v1.GradientEncoding number; 0 (fp32),
// empty data (ENCODING_ZEROS) and no absent ranges are omitted, as
// protobuf does. `absent`: (begin, end) pairs (PushRequest.absent).
grpc::ByteBuffer ChunkMessage(int32_t chunk_id, const grpc::Slice& data,
                              int encoding = 0,
                              absl::Span<const int64_t> absent = {});

// The fields of one PullResponse, its data left in place.
struct PullMessage {
  int64_t version = 0;
  int32_t chunk_id = 0;
  size_t data_begin = 0;
  size_t data_size = 0;
};

// Parses the protobuf encoding of a ferry.v1.PullResponse as protobuf would
// (fields in any order, the last one wins, unknown fields skipped). False
// when the bytes are not a valid encoding.
bool ParsePullMessage(WireReader& in, PullMessage* out);

}  // namespace ferry

#endif  // FERRY_PS_PS_WIRE_H_

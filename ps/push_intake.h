// The shard's side of a push stream, message by message, for both ways a
// push reaches a shard: the gRPC service's Push reactor (ps/ps_service.cc)
// and a worker's direct call of the shard it hosts (ps/local_shard_calls.h).
#ifndef FERRY_PS_PUSH_INTAKE_H_
#define FERRY_PS_PUSH_INTAKE_H_

#include <memory>

#include "absl/status/status.h"
#include "ferry/v1/ps.pb.h"
#include "grpcpp/support/byte_buffer.h"
#include "ps/ps_shard.h"

namespace ferry {

// Takes one message of a push into `shard`: the first (`staging` null) must
// carry the header, which opens the push (PsShard::BeginPush sets
// `staging`); each later one carries one chunk (PsShard::AddChunk) or one
// table's rows (PsShard::AddRows). A chunk may ride along with the header.
// Errors: INVALID_ARGUMENT for a first message without the header, a header
// repeated, or a message with both a chunk and rows (each counted as a
// rejected push); otherwise the shard's. After an error the push is refused
// for good: the caller ends the stream with it.
absl::Status TakePushMessage(PsShard& shard, const v1::PushRequest& request,
                             std::unique_ptr<PsPushStaging>& staging);

// The same for message `index` (from 1) of a push stream as gRPC received
// it: the chunk's bytes are read from the received slices, where they lie
// (ParseBytesFieldInPlace), not parsed into a string first. A message the
// in-place reader does not take is parsed by protobuf; one protobuf refuses
// is INVALID_ARGUMENT "push message <index> does not parse" (a rejected
// push). `wire` may be consumed.
absl::Status TakePushWire(PsShard& shard, grpc::ByteBuffer& wire, int64_t index,
                          std::unique_ptr<PsPushStaging>& staging);

}  // namespace ferry

#endif  // FERRY_PS_PUSH_INTAKE_H_

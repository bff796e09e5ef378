#include "ps/push_intake.h"

#include <optional>
#include <utility>
#include <vector>

#include "proto/raw_wire.h"
#include "ps/sparse_rows_wire.h"

namespace ferry {
namespace {

PsPushHeader FromProto(const v1::PushHeader& h) {
  PsPushHeader header;
  header.job_id = h.job_id();
  header.worker_id = h.worker_id();
  header.generation = h.generation();
  header.step = h.step();
  header.num_samples = h.num_samples();
  header.base_version = h.base_version();
  header.step_contributors.reserve(h.step_contributors_size());
  for (const v1::Contributor& c : h.step_contributors()) {
    header.step_contributors.push_back({c.worker_id(), c.num_samples()});
  }
  return header;
}

// TakePushMessage for a message whose chunk bytes lie in `data` (the
// request's own data field is not read).
absl::Status TakePush(PsShard& shard, const v1::PushRequest& request,
                      absl::Span<const absl::string_view> data,
                      std::unique_ptr<PsPushStaging>& staging) {
  size_t data_bytes = 0;
  for (absl::string_view piece : data) data_bytes += piece.size();
  if (staging == nullptr) {
    if (!request.has_header()) {
      return shard.RejectPush(absl::InvalidArgumentError(
          "the first message of a push must carry the header"));
    }
    absl::StatusOr<std::unique_ptr<PsPushStaging>> begun =
        shard.BeginPush(FromProto(request.header()));
    if (!begun.ok()) return begun.status();
    staging = *std::move(begun);
    // A chunk (or rows) may ride along with the header; real chunks are
    // never empty.
    if (data_bytes == 0 && !request.has_rows()) {
      return absl::OkStatus();
    }
  } else if (request.has_header()) {
    return shard.RejectPush(absl::InvalidArgumentError(
        "push header repeated after the first message"));
  }
  if (request.has_rows()) {
    if (data_bytes != 0) {
      return shard.RejectPush(absl::InvalidArgumentError(
          "a push message carries a chunk and rows; send one per message"));
    }
    absl::StatusOr<SparseRows> rows = FromSparseRowsPart(request.rows());
    if (!rows.ok()) return shard.RejectPush(rows.status());
    return shard.AddRows(*staging, *std::move(rows));
  }
  return shard.AddChunk(*staging, request.chunk_id(),
                        static_cast<GradientEncoding>(request.encoding()), data,
                        request.absent());
}

}  // namespace

absl::Status TakePushMessage(PsShard& shard, const v1::PushRequest& request,
                             std::unique_ptr<PsPushStaging>& staging) {
  const absl::string_view data = request.data();
  return TakePush(shard, request, absl::Span<const absl::string_view>(&data, 1),
                  staging);
}

absl::Status TakePushWire(PsShard& shard, grpc::ByteBuffer& wire, int64_t index,
                          std::unique_ptr<PsPushStaging>& staging) {
  v1::PushRequest head;
  std::optional<std::vector<grpc::Slice>> slices =
      ParseBytesFieldInPlace(wire, v1::PushRequest::kDataFieldNumber, head);
  if (!slices.has_value()) {  // protobuf's verdict
    v1::PushRequest whole;
    if (absl::Status parsed = ParseStreamMessage(wire, whole, "push", index);
        !parsed.ok()) {
      return shard.RejectPush(parsed);
    }
    return TakePushMessage(shard, whole, staging);
  }
  std::vector<absl::string_view> pieces;
  pieces.reserve(slices->size());
  for (const grpc::Slice& s : *slices) {
    pieces.emplace_back(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return TakePush(shard, head, pieces, staging);
}

}  // namespace ferry

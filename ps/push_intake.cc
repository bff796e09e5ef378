#include "ps/push_intake.h"

#include <utility>

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

}  // namespace

absl::Status TakePushMessage(PsShard& shard, const v1::PushRequest& request,
                             std::unique_ptr<PsPushStaging>& staging) {
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
    if (request.data().empty() && !request.has_rows()) {
      return absl::OkStatus();
    }
  } else if (request.has_header()) {
    return shard.RejectPush(absl::InvalidArgumentError(
        "push header repeated after the first message"));
  }
  if (request.has_rows()) {
    if (!request.data().empty()) {
      return shard.RejectPush(absl::InvalidArgumentError(
          "a push message carries a chunk and rows; send one per message"));
    }
    absl::StatusOr<SparseRows> rows = FromSparseRowsPart(request.rows());
    if (!rows.ok()) return shard.RejectPush(rows.status());
    return shard.AddRows(*staging, *std::move(rows));
  }
  const std::string& data = request.data();
  return shard.AddChunk(*staging, request.chunk_id(),
                        static_cast<GradientEncoding>(request.encoding()),
                        data.data(), data.size());
}

}  // namespace ferry

// PsShard's chunks of a push: checked, then copied into the push's own
// buffer or, with sum_on_arrival, summed into the open step's sum
// (OpenStepSum).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_format.h"
#include "ps/ps_shard.h"

namespace ferry {

absl::Status PsShard::AddChunk(PsPushStaging& staging, int32_t chunk_id,
                               const void* data, size_t num_bytes) {
  return AddChunk(staging, chunk_id, GradientEncoding::kFp32, data, num_bytes);
}

absl::Status PsShard::AddChunk(PsPushStaging& staging, int32_t chunk_id,
                               GradientEncoding encoding, const void* data,
                               size_t num_bytes) {
  if (!staging.error_.ok()) return staging.error_;
  const auto fail = [&](absl::Status status) {
    staging.error_ = status;
    return RejectPush(std::move(status));
  };
  if (chunk_id < 0 || chunk_id >= static_cast<int32_t>(all_chunks_.size())) {
    return fail(absl::InvalidArgumentError(
        absl::StrFormat("unknown chunk %d (the model has %d chunks)", chunk_id,
                        all_chunks_.size())));
  }
  const Chunk& chunk = all_chunks_[chunk_id];
  if (chunk.shard != config_.shard_id) {
    return fail(absl::InvalidArgumentError(
        absl::StrFormat("chunk %d is owned by shard %d, not shard %d", chunk_id,
                        chunk.shard, config_.shard_id)));
  }
  const size_t index = static_cast<size_t>(chunk_id - first_owned_id_);
  if (staging.seen_[index]) {
    return fail(absl::InvalidArgumentError(
        absl::StrFormat("chunk %d sent twice in one push", chunk_id)));
  }
  const size_t length = static_cast<size_t>(chunk.length);
  // Where the chunk's floats are decoded to: the push's buffer, or (on
  // arrival) the scratch, unless they are aligned fp32, read in place.
  float* dst = nullptr;
  if (!staging.on_arrival_) {
    dst = staging.grad_.data() + (chunk.flat_offset - range_.begin);
  } else if (encoding != GradientEncoding::kFp32 ||
             reinterpret_cast<uintptr_t>(data) % alignof(float) != 0) {
    staging.scratch_.resize(length);
    dst = staging.scratch_.data();
  }
  const float* values = dst != nullptr ? dst : static_cast<const float*>(data);
  if (encoding == GradientEncoding::kFp32) {
    const size_t expected = length * sizeof(float);
    if (num_bytes != expected) {
      return fail(absl::InvalidArgumentError(
          absl::StrFormat("chunk %d has %d bytes, expected %d (%d floats)",
                          chunk_id, num_bytes, expected, chunk.length)));
    }
    if (dst != nullptr) std::memcpy(dst, data, num_bytes);
  } else if (absl::Status decoded = Decode(
                 encoding,
                 absl::string_view(static_cast<const char*>(data), num_bytes),
                 chunk.length, dst);
             !decoded.ok()) {
    return fail(absl::InvalidArgumentError(
        absl::StrFormat("chunk %d (encoding %d): %s", chunk_id,
                        static_cast<int>(encoding), decoded.message())));
  }
  for (size_t i = 0; i < length; ++i) {
    if (!std::isfinite(values[i])) {
      return fail(absl::InvalidArgumentError(absl::StrFormat(
          "chunk %d: element %d is not finite (%f)", chunk_id, i, values[i])));
    }
  }
  if (staging.on_arrival_) {
    const PsPushHeader& h = staging.header_;
    if (absl::Status summed =
            arrival_.Add(h.worker_id, h.step, h.num_samples, staging.rollbacks_,
                         index, absl::MakeConstSpan(values, length));
        !summed.ok()) {
      return fail(std::move(summed));
    }
  }
  staging.seen_[index] = true;
  ++staging.chunks_seen_;
  return absl::OkStatus();
}

}  // namespace ferry

// PsShard's chunks of a push: checked, then copied into the push's own
// buffer or, with sum_on_arrival, summed into the open step's sum
// (OpenStepSum).
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/finite_scale.h"
#include "common/range_sets.h"
#include "common/status_macros.h"
#include "ps/ps_shard.h"

namespace ferry {

absl::Status PsShard::AddChunk(PsPushStaging& staging, int32_t chunk_id,
                               const void* data, size_t num_bytes) {
  return AddChunk(staging, chunk_id, GradientEncoding::kFp32, data, num_bytes);
}

absl::StatusOr<const Chunk*> PsShard::StagedChunk(PsPushStaging& staging,
                                                  int32_t chunk_id) {
  if (!staging.error_.ok()) return staging.error_;
  if (chunk_id < 0 || chunk_id >= static_cast<int32_t>(all_chunks_.size())) {
    return FailPush(staging, absl::InvalidArgumentError(absl::StrFormat(
                                 "unknown chunk %d (the model has %d chunks)",
                                 chunk_id, all_chunks_.size())));
  }
  const Chunk& chunk = all_chunks_[chunk_id];
  if (chunk.shard != config_.shard_id) {
    return FailPush(staging, absl::InvalidArgumentError(absl::StrFormat(
                                 "chunk %d is owned by shard %d, not shard %d",
                                 chunk_id, chunk.shard, config_.shard_id)));
  }
  if (staging.seen_[static_cast<size_t>(chunk_id - first_owned_id_)]) {
    return FailPush(staging, absl::InvalidArgumentError(absl::StrFormat(
                                 "chunk %d sent twice in one push", chunk_id)));
  }
  return &chunk;
}

absl::Status PsShard::FailPush(PsPushStaging& staging, absl::Status status) {
  staging.error_ = status;
  return RejectPush(std::move(status));
}

absl::Status PsShard::AddChunk(PsPushStaging& staging, int32_t chunk_id,
                               GradientEncoding encoding, const void* data,
                               size_t num_bytes) {
  const absl::string_view piece(static_cast<const char*>(data), num_bytes);
  return AddChunk(staging, chunk_id, encoding,
                  absl::Span<const absl::string_view>(&piece, 1));
}

absl::Status PsShard::AddChunk(PsPushStaging& staging, int32_t chunk_id,
                               GradientEncoding encoding,
                               absl::Span<const absl::string_view> pieces,
                               absl::Span<const int64_t> absent) {
  absl::StatusOr<const Chunk*> found = StagedChunk(staging, chunk_id);
  if (!found.ok()) return found.status();
  const Chunk& chunk = **found;
  const size_t length = static_cast<size_t>(chunk.length);
  size_t num_bytes = 0;
  for (absl::string_view p : pieces) num_bytes += p.size();
  // The bytes in one piece: read in place (a piece of a received message,
  // or the whole string). Else, for decoding, one copy of them.
  std::string joined;
  const char* data = pieces.size() == 1 ? pieces[0].data() : nullptr;
  // Where the chunk's floats go: the push's buffer, or (on arrival) the
  // scratch, unless they are aligned fp32 in one piece, read in place.
  float* dst = nullptr;
  if (!staging.on_arrival_) {
    dst = staging.grad_.data() + (chunk.flat_offset - range_.begin);
  } else if (encoding != GradientEncoding::kFp32 || data == nullptr ||
             reinterpret_cast<uintptr_t>(data) % alignof(float) != 0) {
    staging.scratch_.resize(length);
    dst = staging.scratch_.data();
  }
  const float* values =
      dst != nullptr ? dst : reinterpret_cast<const float*>(data);
  if (encoding == GradientEncoding::kFp32) {
    const size_t expected = length * sizeof(float);
    if (num_bytes != expected) {
      return FailPush(staging,
                      absl::InvalidArgumentError(absl::StrFormat(
                          "chunk %d has %d bytes, expected %d (%d "
                          "floats)",
                          chunk_id, num_bytes, expected, chunk.length)));
    }
    if (dst != nullptr) {  // the pieces' bytes back to back (a float split
                           // between two pieces is joined by the copy)
      char* at = reinterpret_cast<char*>(dst);
      for (absl::string_view p : pieces) {
        if (!p.empty()) std::memcpy(at, p.data(), p.size());
        at += p.size();
      }
    }
  } else {
    if (data == nullptr) {
      for (absl::string_view p : pieces) joined.append(p.data(), p.size());
      data = joined.data();
    }
    if (absl::Status decoded = Decode(
            encoding, absl::string_view(data, num_bytes), chunk.length, dst);
        !decoded.ok()) {
      return FailPush(staging,
                      absl::InvalidArgumentError(absl::StrFormat(
                          "chunk %d (encoding %d): %s", chunk_id,
                          static_cast<int>(encoding), decoded.message())));
    }
  }
  // Absent ranges are checked for zeros before a division could round a
  // tiny value to zero.
  if (!absent.empty()) {
    RETURN_IF_ERROR(AddAbsent(staging, chunk, values, absent));
  }
  const int64_t first_bad =
      staging.divide_by_ != 0.0f
          ? DivideIfFinite(dst, static_cast<int64_t>(length),
                           staging.divide_by_)
          : FirstNonFinite(values, static_cast<int64_t>(length));
  if (first_bad >= 0) {
    return FailPush(staging, absl::InvalidArgumentError(absl::StrFormat(
                                 "chunk %d: element %d is not finite (%f)",
                                 chunk_id, first_bad, values[first_bad])));
  }
  const size_t index = static_cast<size_t>(chunk_id - first_owned_id_);
  if (staging.on_arrival_) {
    const PsPushHeader& h = staging.header_;
    if (absl::Status summed =
            arrival_.Add(h.worker_id, h.step, h.num_samples, staging.rollbacks_,
                         index, absl::MakeConstSpan(values, length));
        !summed.ok()) {
      return FailPush(staging, std::move(summed));
    }
  }
  staging.seen_[index] = true;
  ++staging.chunks_seen_;
  return absl::OkStatus();
}

absl::Status PsShard::AddAbsent(PsPushStaging& staging, const Chunk& chunk,
                                const float* values,
                                absl::Span<const int64_t> absent) {
  std::vector<FlatRange> ranges;
  if (absl::Status s = FromRangePairs(
          absent, chunk.length,
          absl::StrFormat("absent ranges of chunk %d", chunk.id), &ranges);
      !s.ok()) {
    return FailPush(staging, std::move(s));
  }
  const int64_t model_end =
      all_chunks_.back().flat_offset + all_chunks_.back().length;
  const int64_t trainable_end = model_end - config_.state_elements;
  for (const FlatRange& r : ranges) {
    if (chunk.flat_offset + r.end > trainable_end) {
      return FailPush(
          staging,
          absl::InvalidArgumentError(absl::StrFormat(
              "chunk %d: absent range [%d, %d) reaches the model's "
              "non-trainable state (from element %d); only parameters can "
              "be absent",
              chunk.id, r.begin, r.end, trainable_end - chunk.flat_offset)));
    }
    for (int64_t i = r.begin; i < r.end; ++i) {
      if (values[i] != 0.0f) {
        return FailPush(staging, absl::InvalidArgumentError(absl::StrFormat(
                                     "chunk %d: element %d is in an absent "
                                     "range but holds %f, not 0",
                                     chunk.id, i, values[i])));
      }
    }
    const int64_t at = chunk.flat_offset - range_.begin;
    staging.absent_.push_back({at + r.begin, at + r.end});
  }
  return absl::OkStatus();
}

}  // namespace ferry

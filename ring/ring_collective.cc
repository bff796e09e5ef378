#include "ring/ring_collective.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/prometheus_metrics.h"
#include "common/status_macros.h"

namespace ferry {
namespace {

using Range = FlatRange;

// floor(s * count / n) without overflowing for any count.
int64_t SegmentStart(int64_t count, int n, int s) {
  return (count / n) * s + (count % n) * s / n;
}

// Segment s (taken mod n) of count elements over n ranks.
Range Segment(int64_t count, int n, int s) {
  s = ((s % n) + n) % n;
  return {SegmentStart(count, n, s), SegmentStart(count, n, s + 1)};
}

// Segment s (taken mod n) when rank q's final sum is owned[q]: the
// segment whose sum is completed on rank (s - 1) mod n.
Range OwnedSegment(const std::vector<FlatRange>& owned, int n, int s) {
  return owned[static_cast<size_t>((((s - 1) % n) + n) % n)];
}

int64_t PieceCount(int64_t elements, int64_t piece_elements) {
  return elements == 0 ? 0 : (elements - 1) / piece_elements + 1;
}

// Piece p of `range`: its offset in the buffer and its length.
Range Piece(const Range& range, int64_t piece_elements, int64_t p) {
  const int64_t begin = range.begin + p * piece_elements;
  return {begin, std::min(range.end, begin + piece_elements)};
}

absl::Status InCollectiveContext(const absl::Status& status, const char* what,
                                 int64_t op_id, int stage, int rank, int size) {
  return absl::Status(
      status.code(),
      absl::StrCat(what, " op ", op_id, " stage ", stage, " (rank ", rank,
                   " of ", size, "): ", status.message()));
}

}  // namespace

RingCollective::RingCollective(RingTransport* transport, Options options)
    : transport_(transport), options_(options) {}

absl::Status RingCollective::CheckArgs(const char* what, const float* data,
                                       int64_t count) const {
  if (count < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": negative count ", count));
  }
  if (data == nullptr && count > 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": null data"));
  }
  if (options_.piece_elements < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": piece_elements must be >= 1, got ", options_.piece_elements));
  }
  // Broadcast sends the whole buffer as one run of pieces; an all-reduce
  // segment is never longer.
  if (PieceCount(count, options_.piece_elements) >
      std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", count, " elements in pieces of ",
                     options_.piece_elements, " overflow the piece tag"));
  }
  return absl::OkStatus();
}

absl::Status RingCollective::AllReduceSum(int64_t op_id, float* data,
                                          int64_t count) {
  RETURN_IF_ERROR(CheckArgs("AllReduceSum", data, count));
  const int n = size();
  if (n == 1 || count == 0) return absl::OkStatus();
  const absl::Time begun = absl::Now();
  RETURN_IF_ERROR(
      RunStages("AllReduceSum", op_id, data, 0, 2 * n - 3,
                [count, n](int s) { return Segment(count, n, s); }));
  Metrics().allreduce_seconds().Observe(SecondsSince(begun));
  return absl::OkStatus();
}

absl::Status RingCollective::CheckOwned(
    const char* what, int64_t count,
    const std::vector<FlatRange>& owned) const {
  if (static_cast<int>(owned.size()) != size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", owned.size(), " owned ranges for ", size(), " ranks"));
  }
  std::vector<FlatRange> sorted = owned;
  std::sort(sorted.begin(), sorted.end(),
            [](const FlatRange& a, const FlatRange& b) {
              return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
            });
  int64_t next = 0;
  for (const FlatRange& range : sorted) {
    if (range.begin != next || range.end < range.begin) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": the owned ranges do not tile [0, ", count, ")"));
    }
    next = range.end;
  }
  if (next != count) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the owned ranges do not tile [0, ", count, ")"));
  }
  return absl::OkStatus();
}

absl::Status RingCollective::ReduceScatterSum(
    int64_t op_id, float* data, int64_t count,
    const std::vector<FlatRange>& owned) {
  RETURN_IF_ERROR(CheckArgs("ReduceScatterSum", data, count));
  RETURN_IF_ERROR(CheckOwned("ReduceScatterSum", count, owned));
  const int n = size();
  if (n == 1 || count == 0) return absl::OkStatus();
  return RunStages("ReduceScatterSum", op_id, data, 0, n - 2,
                   [&owned, n](int s) { return OwnedSegment(owned, n, s); });
}

absl::Status RingCollective::AllGather(int64_t op_id, float* data,
                                       int64_t count,
                                       const std::vector<FlatRange>& owned) {
  RETURN_IF_ERROR(CheckArgs("AllGather", data, count));
  RETURN_IF_ERROR(CheckOwned("AllGather", count, owned));
  const int n = size();
  if (n == 1 || count == 0) return absl::OkStatus();
  return RunStages("AllGather", op_id, data, n - 1, 2 * n - 3,
                   [&owned, n](int s) { return OwnedSegment(owned, n, s); });
}

absl::Status RingCollective::RunStages(
    const char* what, int64_t op_id, float* data, int first_stage,
    int last_stage, const std::function<FlatRange(int)>& segment_of) {
  const int n = size();
  const int r = rank();
  const absl::Time deadline = absl::Now() + options_.timeout;
  const int64_t piece_elements = options_.piece_elements;

  // At stage k a rank sends segment (r - k): at the first stage all its
  // pieces at once (its own contribution, or in an all-gather its final
  // sum), later each piece as it arrives.
  const Range first = segment_of(r - first_stage);
  for (int64_t p = 0; p < PieceCount(first.size(), piece_elements); ++p) {
    const Range piece = Piece(first, piece_elements, p);
    const RingTag tag{op_id, first_stage, static_cast<int32_t>(p)};
    if (absl::Status s =
            transport_->SendBorrowed(tag, data + piece.begin, piece.size());
        !s.ok()) {
      return InCollectiveContext(s, what, op_id, first_stage, r, n);
    }
  }
  // Pieces go out borrowed (not copied). A segment sent in the
  // reduce-scatter is overwritten only by its all-gather copy, which cannot
  // arrive before the neighbour received what was sent from it (the
  // reduction it completes includes those bytes); what may still be in
  // flight at the end is waited for: WaitSent.
  // Stage k: receive segment (r - k - 1), added in the reduce-scatter
  // (k < n - 1) and copied in the all-gather, and forward each piece for
  // stage k + 1 unless k is the last stage.
  for (int k = first_stage; k <= last_stage; ++k) {
    const Range segment = segment_of(r - k - 1);
    const RecvOp op = k < n - 1 ? RecvOp::kAdd : RecvOp::kCopy;
    for (int64_t p = 0; p < PieceCount(segment.size(), piece_elements); ++p) {
      const Range piece = Piece(segment, piece_elements, p);
      float* const ptr = data + piece.begin;
      const RingTag in_tag{op_id, k, static_cast<int32_t>(p)};
      const RingTag out_tag{op_id, k + 1, static_cast<int32_t>(p)};
      if (op == RecvOp::kCopy && k < last_stage) {
        // All-gather: the piece passes on unchanged.
        if (absl::Status s = transport_->RecvCopyForward(
                in_tag, ptr, piece.size(), out_tag, deadline);
            !s.ok()) {
          return InCollectiveContext(s, what, op_id, k, r, n);
        }
        continue;
      }
      if (absl::Status s =
              transport_->Recv(in_tag, ptr, piece.size(), op, deadline);
          !s.ok()) {
        return InCollectiveContext(s, what, op_id, k, r, n);
      }
      if (k == last_stage) continue;
      if (absl::Status s = transport_->SendBorrowed(out_tag, ptr, piece.size());
          !s.ok()) {
        return InCollectiveContext(s, what, op_id, k + 1, r, n);
      }
    }
  }
  if (absl::Status s = transport_->WaitSent(deadline); !s.ok()) {
    return InCollectiveContext(s, what, op_id, last_stage, r, n);
  }
  return absl::OkStatus();
}

absl::Status RingCollective::AllReduceSumCompressed(
    int64_t op_id, float* data, int64_t count,
    const GradientCompression& compression, float* residual) {
  if (!compression.compressed()) return AllReduceSum(op_id, data, count);
  RETURN_IF_ERROR(CheckArgs("AllReduceSum", data, count));
  if (absl::Status s = ValidateCompression(compression); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("AllReduceSum op ", op_id, ": ", s.message()));
  }
  if (size() == 1 || count == 0) return absl::OkStatus();
  const absl::Time begun = absl::Now();
  const absl::Status status =
      compression.encoding == GradientEncoding::kTopK
          ? AllGatherTopK(op_id, data, count, compression.topk_ratio, residual)
          : AllReduceRounded(op_id, data, count, compression.encoding,
                             residual);
  if (status.ok()) Metrics().allreduce_seconds().Observe(SecondsSince(begun));
  return status;
}

absl::Status RingCollective::AllReduceRounded(int64_t op_id, float* data,
                                              int64_t count,
                                              GradientEncoding encoding,
                                              float* residual) {
  const int n = size();
  const int r = rank();
  const absl::Time deadline = absl::Now() + options_.timeout;
  const int64_t piece_elements = options_.piece_elements;
  const int last_stage = 2 * n - 3;
  if (residual != nullptr) {
    // Our own contribution, rounded with error feedback: every later
    // encoding of our own values is then exact.
    for (int64_t i = 0; i < count; ++i) {
      const float v = data[i] + residual[i];
      const float q = RoundTrip(encoding, v);
      residual[i] = std::isfinite(q) ? v - q : 0.0f;
      data[i] = q;
    }
  }
  const auto send = [&](int stage, int64_t p, const float* ptr, int64_t len) {
    std::string payload;
    Encode(encoding, ptr, len, 0, &payload);
    absl::Status s = transport_->SendBytes(
        RingTag{op_id, stage, static_cast<int32_t>(p)}, std::move(payload));
    return s.ok() ? s
                  : InCollectiveContext(s, "AllReduceSum", op_id, stage, r, n);
  };
  const Range own = Segment(count, n, r);
  for (int64_t p = 0; p < PieceCount(own.size(), piece_elements); ++p) {
    const Range piece = Piece(own, piece_elements, p);
    RETURN_IF_ERROR(send(0, p, data + piece.begin, piece.size()));
  }
  for (int k = 0; k <= last_stage; ++k) {
    const Range segment = Segment(count, n, r - k - 1);
    for (int64_t p = 0; p < PieceCount(segment.size(), piece_elements); ++p) {
      const Range piece = Piece(segment, piece_elements, p);
      float* const ptr = data + piece.begin;
      const RingTag in_tag{op_id, k, static_cast<int32_t>(p)};
      absl::StatusOr<std::string> payload =
          transport_->RecvBytes(in_tag, deadline);
      absl::Status s = payload.status();
      if (s.ok()) {
        s = Decode(encoding, *payload, piece.size(), ptr,
                   k < n - 1 ? DecodeOp::kAdd : DecodeOp::kCopy);
      }
      if (!s.ok())
        return InCollectiveContext(s, "AllReduceSum", op_id, k, r, n);
      if (k == last_stage) continue;
      if (k >= n - 1) {  // all-gather: forward the bytes as received
        s = transport_->SendBytes(
            RingTag{op_id, k + 1, static_cast<int32_t>(p)},
            *std::move(payload));
        if (!s.ok())
          return InCollectiveContext(s, "AllReduceSum", op_id, k + 1, r, n);
        continue;
      }
      if (k == n - 2) {
        // The segment's final sum: keep exactly what the others will get.
        for (int64_t i = 0; i < piece.size(); ++i) {
          ptr[i] = RoundTrip(encoding, ptr[i]);
        }
      }
      RETURN_IF_ERROR(send(k + 1, p, ptr, piece.size()));
    }
  }
  return absl::OkStatus();
}

absl::Status RingCollective::AllGatherTopK(int64_t op_id, float* data,
                                           int64_t count, double ratio,
                                           float* residual) {
  const int n = size();
  const int r = rank();
  const absl::Time deadline = absl::Now() + options_.timeout;
  const int64_t piece_elements = options_.piece_elements;
  const Range all{0, count};
  const int64_t pieces = PieceCount(count, piece_elements);
  // sets[rank][piece]: that rank's encoded top-k of the piece.
  std::vector<std::vector<std::string>> sets(n,
                                             std::vector<std::string>(pieces));
  for (int64_t p = 0; p < pieces; ++p) {
    const Range piece = Piece(all, piece_elements, p);
    EncodeWithFeedback(
        GradientEncoding::kTopK, data + piece.begin, piece.size(), ratio,
        residual == nullptr ? nullptr : residual + piece.begin, &sets[r][p]);
    if (absl::Status s = transport_->SendBytes(
            RingTag{op_id, 0, static_cast<int32_t>(p)}, sets[r][p]);
        !s.ok()) {
      return InCollectiveContext(s, "AllReduceSum", op_id, 0, r, n);
    }
  }
  for (int k = 0; k <= n - 2; ++k) {
    const int from = ((r - k - 1) % n + n) % n;
    for (int64_t p = 0; p < pieces; ++p) {
      const RingTag in_tag{op_id, k, static_cast<int32_t>(p)};
      absl::StatusOr<std::string> payload =
          transport_->RecvBytes(in_tag, deadline);
      if (!payload.ok()) {
        return InCollectiveContext(payload.status(), "AllReduceSum", op_id, k,
                                   r, n);
      }
      sets[from][p] = *std::move(payload);
      if (k == n - 2) continue;
      if (absl::Status s = transport_->SendBytes(
              RingTag{op_id, k + 1, static_cast<int32_t>(p)}, sets[from][p]);
          !s.ok()) {
        return InCollectiveContext(s, "AllReduceSum", op_id, k + 1, r, n);
      }
    }
  }
  // The same sum, in the same order, on every rank.
  for (int64_t p = 0; p < pieces; ++p) {
    const Range piece = Piece(all, piece_elements, p);
    float* const ptr = data + piece.begin;
    std::fill(ptr, ptr + piece.size(), 0.0f);
    for (int src = 0; src < n; ++src) {
      if (absl::Status s = Decode(GradientEncoding::kTopK, sets[src][p],
                                  piece.size(), ptr, DecodeOp::kAdd);
          !s.ok()) {
        return InCollectiveContext(s, "AllReduceSum", op_id, n - 2, r, n);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status RingCollective::Broadcast(int64_t op_id, float* data,
                                       int64_t count, int root) {
  const int n = size();
  const int r = rank();
  if (root < 0 || root >= n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Broadcast op ", op_id, ": root ", root, " outside [0, ", n, ")"));
  }
  RETURN_IF_ERROR(CheckArgs("Broadcast", data, count));
  if (n == 1 || count == 0) return absl::OkStatus();
  const absl::Time deadline = absl::Now() + options_.timeout;
  const int distance = (r - root + n) % n;  // hops from root to us
  const bool forward = distance + 1 < n;    // next rank is not root
  const Range all{0, count};
  for (int64_t p = 0; p < PieceCount(count, options_.piece_elements); ++p) {
    const Range piece = Piece(all, options_.piece_elements, p);
    float* const ptr = data + piece.begin;
    const RingTag out_tag{op_id, distance, static_cast<int32_t>(p)};
    if (distance > 0) {
      const RingTag in_tag{op_id, distance - 1, static_cast<int32_t>(p)};
      const absl::Status s =
          forward ? transport_->RecvCopyForward(in_tag, ptr, piece.size(),
                                                out_tag, deadline)
                  : transport_->Recv(in_tag, ptr, piece.size(), RecvOp::kCopy,
                                     deadline);
      if (!s.ok()) {
        return InCollectiveContext(s, "Broadcast", op_id, distance - 1, r, n);
      }
      continue;  // forwarded, or the last rank
    }
    if (!forward) continue;
    if (absl::Status s = transport_->SendBorrowed(out_tag, ptr, piece.size());
        !s.ok()) {
      return InCollectiveContext(s, "Broadcast", op_id, distance, r, n);
    }
  }
  // Sent and forwarded pieces are read from `data` until written.
  if (absl::Status s = transport_->WaitSent(deadline); !s.ok()) {
    return InCollectiveContext(s, "Broadcast", op_id, distance, r, n);
  }
  return absl::OkStatus();
}

}  // namespace ferry

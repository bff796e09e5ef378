// Ring collectives over a RingTransport: in-place all-reduce (sum) by
// reduce-scatter + all-gather, and a pipelined chain broadcast.
//
// Every rank of the ring calls the same collective with the same op_id,
// count (and root), and the same options; tags are {op_id, stage, piece},
// so op ids must be unique within the transport's life.
//
// AllReduceSum with N ranks: the buffer is cut into N segments, segment s =
// [s*count/N, (s+1)*count/N) (64-bit integer floor), and every segment into
// pieces of at most piece_elements. There are 2(N-1) stages: at stage k rank
// r receives segment (r - k - 1) mod N from rank r - 1, adds it (stages
// 0..N-2, reduce-scatter) or copies it (stages N-1..2N-3, all-gather) into
// its buffer, and forwards each piece as soon as it has it (Send does not
// wait), so every link carries pieces while the rest of the segment is
// still on its way. Each rank sends sum_{j=0}^{2N-3} |segment (r - j) mod N|
// floats, i.e. 2(N-1)/N * count up to the uneven segment rounding. The final
// sum of segment s is computed on rank (s - 1) mod N and copied to the
// others, so all ranks end with bitwise identical buffers.
#ifndef FERRY_RING_RING_COLLECTIVE_H_
#define FERRY_RING_RING_COLLECTIVE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/gradient_codec.h"
#include "common/sharding.h"
#include "ring/ring_transport.h"

namespace ferry {

struct RingCollectiveOptions {
  // Largest message, in floats (default 1 MiB of fp32). Must be >= 1.
  int64_t piece_elements = 256 * 1024;
  // Budget of one whole collective call: its deadline is now + timeout.
  absl::Duration timeout = absl::Seconds(30);
};

// Thread safety: the object holds no per-call state and its methods may be
// called from any thread, but collectives on one transport run one at a
// time: the caller must not overlap two calls on the same transport.
class RingCollective {
 public:
  using Options = RingCollectiveOptions;

  // `transport` is not owned and must outlive this object.
  explicit RingCollective(RingTransport* transport, Options options = {});

  int rank() const { return transport_->rank(); }
  int size() const { return transport_->size(); }
  const Options& options() const { return options_; }

  // Sums data[0, count) over all ranks, in place. N == 1 or count == 0 sends
  // nothing and returns OK.
  // Errors: INVALID_ARGUMENT for count < 0, a null data with count > 0,
  // piece_elements < 1 or more than 2^31-1 pieces in a segment; otherwise
  // the transport's error (DEADLINE_EXCEEDED, DATA_LOSS, UNAVAILABLE,
  // CANCELLED) with "AllReduceSum op <id> stage <k>" and the rank prepended.
  // Never blocks past now + timeout (plus the transport's own latency). On
  // error the content of data is unspecified (partially reduced).
  absl::Status AllReduceSum(int64_t op_id, float* data, int64_t count);

  // AllReduceSum with the gradients compressed on the wire (fp32:
  // AllReduceSum itself). Every rank passes the same compression. Ends with
  // bitwise identical data on every rank, approximately the sum:
  //  fp16 / bf16: the schedule of AllReduceSum with every message encoded:
  //    a receiver decodes and adds in fp32, the sum it sends on is rounded
  //    again (error ~ N roundings); the final sum of a segment is rounded
  //    once by its owner, which keeps the rounded value, and the encoded
  //    bytes are forwarded unchanged in the all-gather. Bytes: half of fp32.
  //  top-k: a sparse all-gather: each rank keeps the top-k of every piece of
  //    its data, the (index, value) sets travel N-1 hops (stage k carries the
  //    sets of rank r - k - 1, forwarded as received), and every rank sums
  //    the N sets of a piece in rank order 0..N-1 into zeros. Each rank
  //    sends (N-1) * 8k bytes per piece.
  // With a non-null `residual` (count floats: this rank's error feedback)
  // the rank's own contribution is data + residual, and the residual keeps
  // what its own encoding dropped (fp16/bf16: the rounding of its own
  // values; the rounding of partial sums on later hops is not fed back).
  // Errors: as AllReduceSum, plus INVALID_ARGUMENT for an invalid
  // compression and DATA_LOSS for a malformed encoded message.
  absl::Status AllReduceSumCompressed(int64_t op_id, float* data, int64_t count,
                                      const GradientCompression& compression,
                                      float* residual);

  // The two halves of AllReduceSum with the caller's segmentation (ZeRO's
  // sharded optimizer state): `owned` has one range of data[0, count) per
  // rank, the ranges tiling [0, count) in any order (any may be empty).
  // ReduceScatterSum leaves the sum over all ranks of data[owned[rank()]]
  // there (the rest of data is then unspecified); AllGather copies every
  // rank's data[owned[q]] to every rank. Segment s of AllReduceSum's
  // schedule is owned[(s - 1) mod N], so the stages, messages and tags are
  // those of AllReduceSum's first (stages 0..N-2) or second (N-1..2N-3)
  // half; each rank sends the sum of the others' ranges once per call.
  // Errors: as AllReduceSum, plus INVALID_ARGUMENT for `owned` not tiling
  // [0, count) or not one range per rank.
  absl::Status ReduceScatterSum(int64_t op_id, float* data, int64_t count,
                                const std::vector<FlatRange>& owned);
  absl::Status AllGather(int64_t op_id, float* data, int64_t count,
                         const std::vector<FlatRange>& owned);

  // Copies root's data[0, count) to every rank along the chain root ->
  // root + 1 -> ... -> root - 1, piece by piece: each rank receives a piece
  // and forwards it at once unless its next rank is root. Stage of a message
  // = its sender's distance from root.
  // Errors: INVALID_ARGUMENT for a root outside [0, N), count < 0, null data
  // with count > 0, or bad piece_elements; otherwise the transport's error
  // with "Broadcast op <id>" and the rank prepended. Never blocks past
  // now + timeout. On error non-root data is unspecified.
  absl::Status Broadcast(int64_t op_id, float* data, int64_t count, int root);

 private:
  absl::Status CheckArgs(const char* what, const float* data,
                         int64_t count) const;
  absl::Status CheckOwned(const char* what, int64_t count,
                          const std::vector<FlatRange>& owned) const;
  // Runs stages [first_stage, last_stage] of the all-reduce schedule over
  // segments segment_of(s) (s taken mod N; the segment whose final sum is
  // completed on rank (s - 1) mod N): at stage k rank r receives segment
  // r - k - 1, adding it before stage N-1 and copying it from then on, and
  // forwards it unless k is last_stage; it starts by sending segment
  // r - first_stage. Ends when its sends are done.
  absl::Status RunStages(const char* what, int64_t op_id, float* data,
                         int first_stage, int last_stage,
                         const std::function<FlatRange(int)>& segment_of);
  absl::Status AllReduceRounded(int64_t op_id, float* data, int64_t count,
                                GradientEncoding encoding, float* residual);
  absl::Status AllGatherTopK(int64_t op_id, float* data, int64_t count,
                             double ratio, float* residual);

  RingTransport* const transport_;
  const Options options_;
};

}  // namespace ferry

#endif  // FERRY_RING_RING_COLLECTIVE_H_

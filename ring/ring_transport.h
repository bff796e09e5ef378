// The messaging a ring collective needs: ordered, reliable float messages to
// the next rank and from the previous rank of a ring, matched by tag.
//
// Implementations: InMemoryRingHub (many ranks in one process, for tests)
// and GrpcRingTransport (ferry.v1.RingPeer streams between worker
// processes).
#ifndef FERRY_RING_RING_TRANSPORT_H_
#define FERRY_RING_RING_TRANSPORT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace ferry {

// Identifies one message of one collective. Every rank computes the same
// tags for the same collective, so a message is matched by tag, not by
// arrival order.
struct RingTag {
  int64_t op_id = 0;  // the collective (unique within a transport's life)
  int32_t stage = 0;  // ring stage within the collective
  int32_t piece = 0;  // piece within the stage

  friend bool operator<(const RingTag& a, const RingTag& b) {
    if (a.op_id != b.op_id) return a.op_id < b.op_id;
    if (a.stage != b.stage) return a.stage < b.stage;
    return a.piece < b.piece;
  }
  friend bool operator==(const RingTag& a, const RingTag& b) {
    return a.op_id == b.op_id && a.stage == b.stage && a.piece == b.piece;
  }
  std::string ToString() const {
    return absl::StrFormat("op %d stage %d piece %d", op_id, stage, piece);
  }
};

// What Recv does with the received values.
enum class RecvOp {
  kCopy,  // dst[i] = received[i]
  kAdd,   // dst[i] += received[i]
};

// Thread safety: Send and Recv may be called concurrently from different
// threads (one sender thread and one receiver thread is the typical use);
// messages to the next rank keep the order in which Send was called.
class RingTransport {
 public:
  virtual ~RingTransport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Queues `count` floats from `data` (copied before returning) for the next
  // rank, (rank + 1) % size, under `tag`. Does not wait for the receiver to
  // ask for it. count may be 0. Errors: UNAVAILABLE when the link to the
  // next rank is broken (the message names the peer), CANCELLED after
  // Abort().
  virtual absl::Status Send(const RingTag& tag, const float* data,
                            int64_t count) = 0;

  // Send without the copy: the transport may read data[0, count) until
  // WaitSent() returns OK (or the transport is destroyed), so the caller
  // keeps it valid and unchanged until then. Same errors as Send. The
  // default copies (Send), for transports that gain nothing by borrowing.
  virtual absl::Status SendBorrowed(const RingTag& tag, const float* data,
                                    int64_t count) {
    return Send(tag, data, count);
  }
  // Waits until no buffer of an earlier SendBorrowed is read any more (its
  // bytes have left this process). DEADLINE_EXCEEDED when some still are
  // at `deadline`.
  virtual absl::Status WaitSent(absl::Time deadline) {
    (void)deadline;
    return absl::OkStatus();
  }

  // Waits until the message `tag` from the previous rank,
  // (rank + size - 1) % size, has arrived, then applies it to dst[0, count)
  // per `op`. Errors: DEADLINE_EXCEEDED when it has not arrived by
  // `deadline` (the message names the peer and the tag); DATA_LOSS when it
  // holds a different number of floats than `count`; UNAVAILABLE when the
  // link from the previous rank broke; CANCELLED after Abort(). On error dst
  // is unchanged, except where a message cut off midway (its sender died)
  // was being applied as it arrived (a shared-memory link): then part of
  // it may be applied, as a failed collective leaves its buffer partly
  // written in any case.
  virtual absl::Status Recv(const RingTag& tag, float* dst, int64_t count,
                            RecvOp op, absl::Time deadline) = 0;

  // Recv(in, dst, count, kCopy, deadline), then SendBorrowed(out, dst,
  // count): a piece that passes through unchanged (the all-gather's and
  // broadcast's forwarding), sent on from dst, so the received bytes are
  // freed once copied rather than held until the next rank reads them. The
  // caller keeps dst unchanged until WaitSent returns. Errors: Recv's, then
  // SendBorrowed's.
  absl::Status RecvCopyForward(const RingTag& in, float* dst, int64_t count,
                               const RingTag& out, absl::Time deadline) {
    if (absl::Status s = Recv(in, dst, count, RecvOp::kCopy, deadline);
        !s.ok()) {
      return s;
    }
    return SendBorrowed(out, dst, count);
  }

  // Opaque payloads (compressed gradient pieces, common/gradient_codec.h)
  // travel the same links: SendBytes queues `payload` as Send does (same
  // errors; count is the payload's size), RecvBytes waits for the payload
  // of `tag` as Recv does (same errors, no size check: the caller decodes
  // and validates it). A tag is sent either with Send or with SendBytes.
  virtual absl::Status SendBytes(const RingTag& tag, std::string payload) = 0;
  virtual absl::StatusOr<std::string> RecvBytes(const RingTag& tag,
                                                absl::Time deadline) = 0;

  // Makes every pending and later Send/Recv return CANCELLED (e.g. the
  // generation changed). Idempotent.
  virtual void Abort() = 0;
};

}  // namespace ferry

#endif  // FERRY_RING_RING_TRANSPORT_H_

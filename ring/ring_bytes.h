// Byte collectives over a RingTransport, for payloads of any size whose
// length only the sender knows: an all-gather (ring mode's row gradients,
// worker/ring_tables.h) and a chain broadcast (a member's tables into a new
// ring). A payload travels as one header message (its size, 8 bytes
// little-endian) and then pieces of at most piece_bytes, all under
// {op_id, stage} with piece numbers 0 (header), 1, 2, ...
//
// Every rank calls the same collective with the same op_id, root and
// piece_bytes; op ids share the transport's space with RingCollective's
// (unique within the transport's life).
//
// Errors: INVALID_ARGUMENT for bad arguments; the transport's
// (DEADLINE_EXCEEDED by `deadline`, UNAVAILABLE, CANCELLED) with the
// collective, op, stage and rank prepended; DATA_LOSS for a header that is
// not 8 bytes, a size above kMaxRingPayloadBytes or a piece of the wrong
// size. Never blocks past `deadline` (plus the transport's latency).
//
// Thread safety: as RingCollective: one collective at a time per transport.
#ifndef FERRY_RING_RING_BYTES_H_
#define FERRY_RING_RING_BYTES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ring/ring_transport.h"

namespace ferry {

// The largest payload a rank accepts (a peer cannot make it allocate more).
inline constexpr int64_t kMaxRingPayloadBytes = int64_t{16} << 30;

// Every rank's `mine` to every rank: returns out[k] = rank k's payload
// (out[rank] is `mine`). N - 1 stages: at stage k a rank sends the payload
// of rank (r - k) mod N (its own at stage 0) and receives that of rank
// (r - k - 1) mod N, so each rank sends the other payloads once each.
absl::StatusOr<std::vector<std::string>> AllGatherBytes(
    RingTransport& transport, int64_t op_id, std::string mine,
    int64_t piece_bytes, absl::Time deadline);

// Root's `payload` to every rank along the chain root -> root + 1 -> ...,
// each piece forwarded as soon as it arrives. On return every rank's
// `payload` is root's (unspecified on error).
absl::Status BroadcastBytes(RingTransport& transport, int64_t op_id,
                            std::string& payload, int root, int64_t piece_bytes,
                            absl::Time deadline);

}  // namespace ferry

#endif  // FERRY_RING_RING_BYTES_H_

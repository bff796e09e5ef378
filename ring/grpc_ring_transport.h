// RingTransport over ferry.v1.RingPeer: one Exchange stream to the next
// rank (opened on the first Send, kept for the ring's lifetime, written by
// the gRPC callback API so Send never waits for the network), and the
// local RingMailbox into which this worker's RingPeerService files what the
// previous rank streams.
//
// Shared memory: with `shared_memory`, the first send offers the next rank
// a shared-memory link for the generation (ring/shm_link.h,
// OfferSharedMemory). Where it accepts (the same host and /dev/shm), the
// messages go through the link, and the stream carries only the hello, so
// that each end still sees the other die; elsewhere (another host, another
// pod, an error) the stream carries them, as without. Never with link
// emulation (`shaper`): the emulated link is the stream. Receiving needs no
// option: a link the left neighbour's offer attached to the mailbox is
// read wherever the mailbox has it.
//
// One transport per ring generation: when the ring changes, destroy it and
// make a new one.
#ifndef FERRY_RING_GRPC_RING_TRANSPORT_H_
#define FERRY_RING_GRPC_RING_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/byte_counter.h"
#include "common/link_shaper.h"
#include "common/peer_limits.h"
#include "ferry/v1/ring.pb.h"
#include "ring/ring_mailbox.h"
#include "ring/ring_payload.h"
#include "ring/ring_transport.h"
#include "ring/shm_link_sender.h"

namespace ferry {

struct RingMemberAddress {
  std::string worker_id;
  std::string peer_address;  // HOST:PORT of its RingPeer service
};

struct GrpcRingTransportOptions {
  std::string job_id;
  int64_t generation = 0;
  int rank = 0;
  std::vector<RingMemberAddress> ring;  // rank order
  RingMailbox* mailbox = nullptr;       // this worker's; not owned
  ByteCounter* counter = nullptr;       // bytes to/from peers; not owned
  // Link emulation (not owned; null: none): each message waits for its send
  // bucket, booked when Send() queues it, on the shaper's timer thread.
  LinkShaper* shaper = nullptr;
  // Deadline of the Exchange stream (it spans the ring's lifetime; every
  // Recv has its own, much shorter deadline).
  absl::Duration stream_deadline = absl::Hours(24 * 7);
  // Offer the next rank a shared-memory link of this many bytes (above).
  bool shared_memory = false;
  int64_t shared_memory_bytes = kDefaultRingShmBytes;
};

class GrpcRingTransport final : public RingTransport {
 public:
  // INVALID_ARGUMENT for a rank outside the ring, an empty address or a
  // missing mailbox / counter. Connects lazily.
  static absl::StatusOr<std::unique_ptr<GrpcRingTransport>> Create(
      GrpcRingTransportOptions options);
  // Closes the stream (half-close, then waits up to 1 s for its end).
  ~GrpcRingTransport() override;

  int rank() const override { return options_.rank; }
  int size() const override { return static_cast<int>(options_.ring.size()); }
  absl::Status Send(const RingTag& tag, const float* data,
                    int64_t count) override;
  // The floats go out as a slice over `data` itself; WaitSent waits until
  // every such message was written to the socket (or the stream ended).
  absl::Status SendBorrowed(const RingTag& tag, const float* data,
                            int64_t count) override;
  absl::Status WaitSent(absl::Time deadline) override;
  absl::Status Recv(const RingTag& tag, float* dst, int64_t count, RecvOp op,
                    absl::Time deadline) override;
  absl::Status SendBytes(const RingTag& tag, std::string payload) override;
  absl::StatusOr<std::string> RecvBytes(const RingTag& tag,
                                        absl::Time deadline) override;
  void Abort() override;

  // Whether this transport's messages go through a shared-memory link
  // (decided at the first send).
  bool uses_shared_memory() const { return shm_ != nullptr; }

  class Writer;  // the Exchange stream's reactor; defined in the .cc

 private:
  explicit GrpcRingTransport(GrpcRingTransportOptions options);
  std::string PeerName(int rank) const;
  // Opens the stream to the next rank (and, when offered and accepted, the
  // shared-memory link) before the first message.
  void Connect();
  // The link the next rank accepted, or null (the reason logged).
  std::shared_ptr<ShmLinkSender> OfferLink();
  // A message for `tag`; the first one of the stream carries the hello.
  v1::RingMessage StartMessage(const RingTag& tag);
  // Waits for message `tag` from the previous rank: filed in the mailbox
  // (stream, or set aside from the link) -> *filed; or next on the
  // shared-memory link -> `direct` reads it from there. What the link holds
  // before it is filed for its takers. Errors name the peer and the tag.
  absl::Status Receive(
      const RingTag& tag, absl::Time deadline,
      std::optional<RingPayload>* filed,
      const std::function<absl::Status(ShmLinkReader&, const ShmLinkMessage&)>&
          direct);
  // Counts a message the collective took (from the mailbox or the link)
  // as received.
  void CountReceived(const RingTag& tag, size_t payload_bytes, bool encoded);

  const GrpcRingTransportOptions options_;
  const uint32_t ring_fingerprint_;  // ShmLinkKey's, of options_.ring
  const std::string inbound_key_;    // the link from the previous rank
  std::unique_ptr<Writer> writer_;
  std::shared_ptr<ShmLinkSender> shm_;  // also held by the stream's end
  bool hello_sent_ = false;
};

}  // namespace ferry

#endif  // FERRY_RING_GRPC_RING_TRANSPORT_H_

// StageLink over two RingTransports (in a job: GrpcRingTransport, the ring's
// gRPC streams and mailboxes): `forward`, whose ranks are the replica's
// stages in order (so its next rank is stage s+1), carries activations; and
// `backward`, whose ranks are the stages in reverse order (rank P-1-s, next
// rank stage s-1), carries input gradients. Each opens its stream on its
// first send, so the wrap-around links (last to first stage) are never
// opened. Deadlines, byte accounting per peer, link emulation and the
// mailbox's limits are the ring's.
//
// Tags (docs/protocol.md, "Pipeline stages"): op_id = -1 - step (ring
// collectives use op ids >= 0, so both share one mailbox per generation),
// stage 0 forward / 1 backward, piece = micro-batch.
//
// Thread safety: as StageLink; the transports must outlive the link.
#ifndef FERRY_PIPELINE_RING_STAGE_LINK_H_
#define FERRY_PIPELINE_RING_STAGE_LINK_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "pipeline/stage_link.h"
#include "ring/ring_transport.h"

namespace ferry {

// The tag of micro-batch `micro` of `step` in one direction.
RingTag PipelineTag(int64_t step, bool backward, int micro);

class RingStageLink final : public StageLink {
 public:
  // REQUIRES: forward->size() == backward->size() == stages, forward's rank
  // is `stage` and backward's stages - 1 - stage.
  RingStageLink(int stage, int stages, RingTransport* forward,
                RingTransport* backward)
      : stage_(stage),
        stages_(stages),
        forward_(forward),
        backward_(backward) {}

  absl::Status SendActivations(int64_t step, int micro,
                               std::vector<float> values) override;
  absl::StatusOr<std::vector<float>> ReceiveActivations(
      int64_t step, int micro, int64_t count, absl::Duration timeout) override;
  absl::Status SendInputGradient(int64_t step, int micro,
                                 std::vector<float> values) override;
  absl::StatusOr<std::vector<float>> ReceiveOutputGradient(
      int64_t step, int micro, int64_t count, absl::Duration timeout) override;
  int64_t bytes_sent() const override { return sent_; }
  int64_t bytes_received() const override { return received_; }

 private:
  absl::Status Send(RingTransport* transport, const RingTag& tag,
                    const std::vector<float>& values);
  absl::StatusOr<std::vector<float>> Receive(RingTransport* transport,
                                             const RingTag& tag, int64_t count,
                                             absl::Duration timeout);
  absl::Status NoNeighbour(const char* which) const;

  const int stage_;
  const int stages_;
  RingTransport* const forward_;
  RingTransport* const backward_;
  std::atomic<int64_t> sent_{0};
  std::atomic<int64_t> received_{0};
};

}  // namespace ferry

#endif  // FERRY_PIPELINE_RING_STAGE_LINK_H_

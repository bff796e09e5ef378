#include "pipeline/ring_stage_link.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ferry {

RingTag PipelineTag(int64_t step, bool backward, int micro) {
  return RingTag{-1 - step, backward ? 1 : 0, micro};
}

absl::Status RingStageLink::NoNeighbour(const char* which) const {
  return absl::FailedPreconditionError(
      absl::StrCat("pipeline stage ", stage_, " has no ", which, " stage"));
}

absl::Status RingStageLink::Send(RingTransport* transport, const RingTag& tag,
                                 const std::vector<float>& values) {
  const int64_t count = static_cast<int64_t>(values.size());
  absl::Status sent = transport->Send(tag, values.data(), count);
  if (!sent.ok()) {
    return absl::Status(sent.code(), absl::StrCat("pipeline stage ", stage_,
                                                  ": ", sent.message()));
  }
  sent_ += 4 * count;
  return sent;
}

absl::StatusOr<std::vector<float>> RingStageLink::Receive(
    RingTransport* transport, const RingTag& tag, int64_t count,
    absl::Duration timeout) {
  std::vector<float> values(count);
  absl::Status got = transport->Recv(tag, values.data(), count, RecvOp::kCopy,
                                     absl::Now() + timeout);
  if (!got.ok()) {
    return absl::Status(got.code(), absl::StrCat("pipeline stage ", stage_,
                                                 ": ", got.message()));
  }
  received_ += 4 * count;
  return values;
}

absl::Status RingStageLink::SendActivations(int64_t step, int micro,
                                            std::vector<float> values) {
  if (stage_ + 1 >= stages_) return NoNeighbour("next");
  return Send(forward_, PipelineTag(step, false, micro), values);
}

absl::StatusOr<std::vector<float>> RingStageLink::ReceiveActivations(
    int64_t step, int micro, int64_t count, absl::Duration timeout) {
  if (stage_ == 0) return NoNeighbour("previous");
  return Receive(forward_, PipelineTag(step, false, micro), count, timeout);
}

absl::Status RingStageLink::SendInputGradient(int64_t step, int micro,
                                              std::vector<float> values) {
  if (stage_ == 0) return NoNeighbour("previous");
  return Send(backward_, PipelineTag(step, true, micro), values);
}

absl::StatusOr<std::vector<float>> RingStageLink::ReceiveOutputGradient(
    int64_t step, int micro, int64_t count, absl::Duration timeout) {
  if (stage_ + 1 >= stages_) return NoNeighbour("next");
  return Receive(backward_, PipelineTag(step, true, micro), count, timeout);
}

}  // namespace ferry

// What one pipeline stage exchanges with its neighbours in its replica, per
// step and micro-batch: activations forward (to stage s+1) and their
// gradients backward (to stage s-1). Implementations: InMemoryStageHub's links
// (tests, one process) and RingStageLink (the ring's gRPC streams between
// workers).
//
// Messages are keyed by (step, micro-batch), so a message that arrives before
// its receiver asks for it waits in the link, and one of another step is
// never taken for this one.
//
// Thread safety: one thread per link at a time (the stage's runner).
#ifndef FERRY_PIPELINE_STAGE_LINK_H_
#define FERRY_PIPELINE_STAGE_LINK_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ferry {

class StageLink {
 public:
  virtual ~StageLink() = default;

  // Sends micro-batch `micro`'s stage output to the next stage.
  // FAILED_PRECONDITION on the last stage; UNAVAILABLE when the next stage is
  // gone.
  virtual absl::Status SendActivations(int64_t step, int micro,
                                       std::vector<float> values) = 0;
  // The previous stage's output for (step, micro), `count` floats, waiting
  // up to `timeout`: DEADLINE_EXCEEDED naming the stage and micro-batch when
  // it does not come, DATA_LOSS when it holds another number of floats,
  // UNAVAILABLE / ABORTED / CANCELLED when the link was closed or aborted.
  // FAILED_PRECONDITION on the first stage.
  virtual absl::StatusOr<std::vector<float>> ReceiveActivations(
      int64_t step, int micro, int64_t count, absl::Duration timeout) = 0;

  // Sends the gradient of micro-batch `micro`'s stage input to the previous
  // stage. FAILED_PRECONDITION on the first stage.
  virtual absl::Status SendInputGradient(int64_t step, int micro,
                                         std::vector<float> values) = 0;
  // The next stage's input gradient, i.e. the gradient of this stage's
  // output, for (step, micro); errors as ReceiveActivations.
  // FAILED_PRECONDITION on the last stage.
  virtual absl::StatusOr<std::vector<float>> ReceiveOutputGradient(
      int64_t step, int micro, int64_t count, absl::Duration timeout) = 0;

  // Bytes this link sent and received (payload floats x 4).
  virtual int64_t bytes_sent() const = 0;
  virtual int64_t bytes_received() const = 0;
};

}  // namespace ferry

#endif  // FERRY_PIPELINE_STAGE_LINK_H_

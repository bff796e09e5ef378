// Fetches the weights a ring member holds (RingPeer.GetWeights): ring mode's
// whole model, hybrid mode's dense layers. Tries the current members in rank
// order and retries while none has published the weights of the step asked
// for yet (members publish between steps, when asked). The first member
// that says it will publish them is waited for alone, up to `prefer_wait`,
// since every member asked copies the model into a snapshot; past that
// (the member stuck or gone), every member is asked again. A member of a
// ring pipeline sends only the stages it holds current; the parts of
// several members then make the model, all of one step count.
//
// Thread safety: every method may be called from any thread.
#ifndef FERRY_COORDINATOR_RING_WEIGHTS_SOURCE_H_
#define FERRY_COORDINATOR_RING_WEIGHTS_SOURCE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/byte_counter.h"

namespace ferry {

class RingWeightsSource {
 public:
  // Returns the peer addresses of the current members, rank order.
  using MemberSource = std::function<std::vector<std::string>()>;

  RingWeightsSource(std::string job_id, absl::Duration fetch_timeout,
                    absl::Duration prefer_wait = absl::Seconds(5))
      : job_id_(std::move(job_id)),
        fetch_timeout_(fetch_timeout),
        prefer_wait_(prefer_wait) {}

  // Must be set before the first Fetch (i.e. right after the coordinator is
  // created).
  void set_member_source(MemberSource source);

  // Fills `params` (its size is the number of weights expected) with a
  // member's weights after >= min_step steps and, with a non-null `tables`,
  // `*tables` with the member's embedding tables' blob (empty for a model
  // without tables; a blob without `tables` is DATA_LOSS). DEADLINE_EXCEEDED
  // when no member gave them within the fetch timeout (retrying members that
  // are UNAVAILABLE or have not published them yet); DATA_LOSS for a malformed
  // or wrongly sized weights stream.
  absl::Status Fetch(int64_t min_step, std::vector<float>& params,
                     std::string* tables = nullptr);

  TransferBytes bytes() const { return counter_.Get(); }

 private:
  // What one member's stream held: its step count and the element ranges
  // it sent (ascending, disjoint).
  struct Part {
    int64_t steps = -1;
    std::vector<std::pair<int64_t, int64_t>> covered;
  };
  absl::Status FetchFrom(const std::string& address, int64_t min_step,
                         std::vector<float>& params, std::string* tables,
                         Part* part);

  const std::string job_id_;
  const absl::Duration fetch_timeout_;
  const absl::Duration prefer_wait_;
  ByteCounter counter_;
  absl::Mutex mu_;
  MemberSource members_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_RING_WEIGHTS_SOURCE_H_

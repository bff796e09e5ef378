// RecoveryState: where the job stands in elasticity and recovery. The
// fence (raised by every abort: members give up steps formed under an
// older one), the generation last sent to the shards, the step being
// finalized ("in doubt": it may have been applied), whether the shards
// and the accounting must be reconciled before another step forms (and
// why), and the counts of aborted steps, rollbacks and restarts.
//
// Ownership: plain value type.
// Thread safety: not thread-safe. The Coordinator holds it as a field
// guarded by its mutex (ABSL_GUARDED_BY(mu_)).
#ifndef FERRY_COORDINATOR_RECOVERY_STATE_H_
#define FERRY_COORDINATOR_RECOVERY_STATE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "ferry/v1/coordinator.pb.h"
#include "ferry/v1/coordinator_state.pb.h"

namespace ferry {

class RecoveryState {
 public:
  int64_t fence() const { return fence_; }
  // Raises the fence: leases and reports of the old one are void.
  void RaiseFence() { ++fence_; }
  // Whether the shards have not been sent `generation` yet.
  bool FenceDue(int64_t generation) const {
    return fenced_generation_ < generation;
  }
  // The shards were sent `generation` (an older one changes nothing).
  void Fenced(int64_t generation) {
    if (generation > fenced_generation_) fenced_generation_ = generation;
  }

  // The step being finalized, with its pushed tasks; nullopt when none.
  const std::optional<v1::AppliedStep>& in_doubt() const { return in_doubt_; }
  void SetInDoubt(v1::AppliedStep step) { in_doubt_ = std::move(step); }
  void ClearInDoubt() { in_doubt_.reset(); }

  // Whether the shards and the accounting must be reconciled before a step
  // forms, and why (for the events and logs).
  bool needed() const { return needed_; }
  const std::string& why() const { return why_; }
  // A recovery is needed; `why` replaces the reason when given.
  void Require() { needed_ = true; }
  void Require(std::string why) {
    needed_ = true;
    why_ = std::move(why);
  }
  // The shards and the accounting agree again.
  void Done() { needed_ = false; }

  void CountAborted(int64_t steps) { aborted_steps_ += steps; }
  void CountRollback() { ++rollbacks_; }
  int64_t restarts() const { return restarts_; }

  // StatusResponse: aborted_steps, rollbacks, restarts.
  void FillStatus(v1::StatusResponse& status) const;
  // CoordinatorState: the fence, the step in doubt and the counts.
  void SaveTo(v1::CoordinatorState& state) const;
  // A restart from `state`: its step in doubt and counts, one restart
  // more, a fence above every fence the old run handed out, and a
  // recovery needed.
  void LoadFrom(const v1::CoordinatorState& state);

 private:
  int64_t fence_ = 0;
  int64_t fenced_generation_ = 0;
  std::optional<v1::AppliedStep> in_doubt_;
  bool needed_ = false;
  std::string why_ = "the coordinator restarted";
  int64_t aborted_steps_ = 0;
  int64_t rollbacks_ = 0;
  int64_t restarts_ = 0;
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_RECOVERY_STATE_H_

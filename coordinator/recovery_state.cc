#include "coordinator/recovery_state.h"

namespace ferry {

void RecoveryState::FillStatus(v1::StatusResponse& status) const {
  status.set_aborted_steps(aborted_steps_);
  status.set_rollbacks(rollbacks_);
  status.set_restarts(restarts_);
}

void RecoveryState::SaveTo(v1::CoordinatorState& state) const {
  state.set_fence(fence_);
  if (in_doubt_.has_value()) *state.mutable_in_doubt() = *in_doubt_;
  state.set_aborted_steps(aborted_steps_);
  state.set_rollbacks(rollbacks_);
  state.set_restarts(restarts_);
}

void RecoveryState::LoadFrom(const v1::CoordinatorState& state) {
  if (state.has_in_doubt()) in_doubt_ = state.in_doubt();
  aborted_steps_ = state.aborted_steps();
  rollbacks_ = state.rollbacks();
  restarts_ = state.restarts() + 1;
  // A prefetch that names an old fence is answered with a re-formed step,
  // not parked behind it.
  fence_ = state.fence() + 1;
  Require("the coordinator restarted");
}

}  // namespace ferry

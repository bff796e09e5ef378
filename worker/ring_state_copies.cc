#include "worker/ring_state_copies.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace ferry {

absl::Status RingStateCopies::CopyInto(const RingState& state, Copy& copy) {
  const int64_t steps = state.optimizer->steps_applied();
  std::vector<DeviceBuffer*> buffers = state.optimizer->StateBuffers();
  const int64_t params = ParamsElements(state);
  const int64_t state_elements = static_cast<int64_t>(state.optimizer->size());
  // Allocated for the first copy; again when a sharded member's slice
  // changed size with its ring.
  if (copy.params.empty() ||
      copy.params.size() != static_cast<size_t>(params) ||
      copy.state.size() != buffers.size() ||
      (!buffers.empty() &&
       copy.state[0].size() != static_cast<size_t>(state_elements))) {
    copy = Copy{};
    ASSIGN_OR_RETURN(copy.params, backend_->Allocate(params));
    for (size_t k = 0; k < buffers.size(); ++k) {
      ASSIGN_OR_RETURN(DeviceBuffer b, backend_->Allocate(state_elements));
      copy.state.push_back(std::move(b));
    }
  }
  copy.steps = -1;
  RETURN_IF_ERROR(backend_->Copy(state.params, params, copy.params.data()));
  for (size_t k = 0; k < buffers.size(); ++k) {
    RETURN_IF_ERROR(backend_->Copy(buffers[k]->data(), state_elements,
                                   copy.state[k].data()));
  }
  copy.current =
      state.current != nullptr ? *state.current : std::vector<bool>();
  copy.steps = steps;
  return absl::OkStatus();
}

RingStateCopies::Copy& RingStateCopies::SlotFor(int64_t steps) {
  const int64_t committed = committed_.load();
  Copy* unallocated = nullptr;
  Copy* oldest = nullptr;
  for (Copy& copy : rollback_) {
    if (copy.params.empty()) {
      if (unallocated == nullptr) unallocated = &copy;
      continue;
    }
    // Empty (-1), or before the committed steps; or this very step's,
    // replayed after a rollback (the same state).
    if (copy.steps < committed || copy.steps == steps) return copy;
    if (oldest == nullptr || copy.steps < oldest->steps) oldest = &copy;
  }
  return unallocated != nullptr ? *unallocated : *oldest;
}

absl::Status RingStateCopies::Keep(const RingState& state, bool checkpoint) {
  const int64_t steps = state.optimizer->steps_applied();
  RETURN_IF_ERROR(CopyInto(state, SlotFor(steps)));
  if (!checkpoint) return absl::OkStatus();
  // Over the older of the two (an empty copy is the oldest), unless this
  // step's state is kept already (a step replayed after a rollback).
  Copy* slot = &checkpoint_[0];
  for (Copy& kept : checkpoint_) {
    if (kept.steps == steps) return absl::OkStatus();
    if (kept.steps < slot->steps) slot = &kept;
  }
  return CopyInto(state, *slot);
}

const RingStateCopies::Copy* RingStateCopies::Find(int64_t steps) const {
  const Copy* found = nullptr;
  for (const Copy& kept : rollback_) {
    if (kept.steps == steps) found = &kept;
  }
  for (const Copy& kept : checkpoint_) {
    if (found == nullptr && kept.steps == steps) found = &kept;
  }
  return found;
}

absl::Status RingStateCopies::CheckKept(int64_t steps, int64_t applied) const {
  if (Find(steps) != nullptr) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "no copy of the state after %d steps is kept (have %d steps applied, "
      "%d committed)",
      steps, applied, committed_.load()));
}

absl::Status RingStateCopies::RestoreTo(int64_t steps, const RingState& state) {
  Optimizer& optimizer = *state.optimizer;
  RETURN_IF_ERROR(CheckKept(steps, optimizer.steps_applied()));
  const Copy& copy = *Find(steps);
  std::vector<DeviceBuffer*> buffers = optimizer.StateBuffers();
  if (copy.params.size() != static_cast<size_t>(ParamsElements(state)) ||
      copy.state.size() != buffers.size() ||
      (!buffers.empty() && copy.state[0].size() != optimizer.size())) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the copy of the state after %d steps is of another slice", steps));
  }
  RETURN_IF_ERROR(
      backend_->Copy(copy.params.data(), copy.params.size(), state.params));
  for (size_t k = 0; k < buffers.size(); ++k) {
    RETURN_IF_ERROR(backend_->Copy(copy.state[k].data(), optimizer.size(),
                                   buffers[k]->data()));
  }
  LogWarn("rolled the ring state back",
          {{"from_steps", optimizer.steps_applied()}, {"to_steps", steps}});
  optimizer.set_steps_applied(steps);
  if (state.current != nullptr &&
      copy.current.size() == state.current->size()) {
    *state.current = copy.current;
  }
  // Copies of later states belong to the undone history.
  for (Copy& kept : rollback_) {
    if (kept.steps > steps) kept.steps = -1;
  }
  for (Copy& kept : checkpoint_) {
    if (kept.steps > steps) kept.steps = -1;
  }
  return absl::OkStatus();
}

void RingStateCopies::ObserveCommitted(int64_t steps) {
  if (!committed_steps_final_) return;
  int64_t seen = committed_.load();
  while (steps > seen && !committed_.compare_exchange_weak(seen, steps)) {
  }
}

void RingStateCopies::DropCommitted() {
  const int64_t committed = committed_.load();
  for (Copy& copy : rollback_) {
    if (!copy.params.empty() && copy.steps < committed) copy = Copy{};
  }
}

void RingStateCopies::Forget() {
  for (Copy& copy : rollback_) copy.steps = -1;
  for (Copy& copy : checkpoint_) copy.steps = -1;
}

int RingStateCopies::rollback_copies() const {
  int allocated = 0;
  for (const Copy& copy : rollback_) allocated += copy.params.empty() ? 0 : 1;
  return allocated;
}

int64_t RingStateCopies::copy_bytes() const {
  int64_t largest = 0;
  for (const Copy& copy : rollback_) {
    int64_t bytes = static_cast<int64_t>(copy.params.size() * sizeof(float));
    for (const DeviceBuffer& b : copy.state) {
      bytes += static_cast<int64_t>(b.size() * sizeof(float));
    }
    largest = std::max(largest, bytes);
  }
  return largest;
}

}  // namespace ferry

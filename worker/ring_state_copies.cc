#include "worker/ring_state_copies.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace ferry {
namespace {

using Spans = std::vector<absl::Span<float>>;

// `sizes` floats each, laid out back to back over `free` (a part may go on
// in the next span), or empty when they do not fit.
std::vector<Spans> LayOut(const Spans& free,
                          const std::vector<int64_t>& sizes) {
  std::vector<Spans> parts;
  size_t span = 0;
  int64_t used = 0;  // of free[span]
  for (const int64_t size : sizes) {
    Spans& part = parts.emplace_back();
    for (int64_t left = size; left > 0;) {
      if (span == free.size()) return {};
      const int64_t take =
          std::min(left, static_cast<int64_t>(free[span].size()) - used);
      if (take > 0) part.push_back(free[span].subspan(used, take));
      left -= take;
      used += take;
      if (used == static_cast<int64_t>(free[span].size())) {
        ++span;
        used = 0;
      }
    }
  }
  return parts;
}

// Copies the floats of `from`'s spans, back to back, into `to`'s (as many
// in all).
absl::Status CopyAcross(ComputeBackend& backend, const Spans& from,
                        const Spans& to) {
  size_t i = 0, j = 0;
  int64_t at_i = 0, at_j = 0;
  while (i < from.size() && j < to.size()) {
    const int64_t n = std::min(static_cast<int64_t>(from[i].size()) - at_i,
                               static_cast<int64_t>(to[j].size()) - at_j);
    RETURN_IF_ERROR(
        backend.Copy(from[i].data() + at_i, n, to[j].data() + at_j));
    at_i += n;
    at_j += n;
    if (at_i == static_cast<int64_t>(from[i].size())) ++i, at_i = 0;
    if (at_j == static_cast<int64_t>(to[j].size())) ++j, at_j = 0;
  }
  return absl::OkStatus();
}

// The live state's parts: params, then each optimizer state buffer.
std::vector<Spans> LiveParts(const RingState& state, int64_t params_elements) {
  std::vector<Spans> parts;
  parts.push_back({absl::MakeSpan(state.params, params_elements)});
  for (DeviceBuffer* b : state.optimizer->StateBuffers()) {
    parts.push_back({absl::MakeSpan(b->data(), state.optimizer->size())});
  }
  return parts;
}

}  // namespace

int64_t RingStateCopies::Copy::bytes() const {
  const int64_t buffers = static_cast<int64_t>(parts.size()) - 1;
  return (params_elements + state_elements * std::max<int64_t>(buffers, 0)) *
         static_cast<int64_t>(sizeof(float));
}

absl::Status RingStateCopies::Shape(Copy& copy, int64_t params_elements,
                                    int64_t state_elements,
                                    size_t state_buffers) {
  if (!copy.storage.empty() && copy.params_elements == params_elements &&
      copy.state_elements == state_elements &&
      copy.parts.size() == state_buffers + 1) {
    return absl::OkStatus();
  }
  // Allocated for the first copy; again when a sharded member's slice
  // changed size with its ring.
  copy = Copy{};
  for (size_t k = 0; k <= state_buffers; ++k) {
    const int64_t n = k == 0 ? params_elements : state_elements;
    ASSIGN_OR_RETURN(DeviceBuffer b, backend_->Allocate(n));
    copy.storage.push_back(std::move(b));
    copy.parts.push_back(
        {absl::MakeSpan(copy.storage.back().data(), static_cast<size_t>(n))});
  }
  copy.params_elements = params_elements;
  copy.state_elements = state_elements;
  return absl::OkStatus();
}

bool RingStateCopies::PlaceInLent(int64_t params_elements,
                                  int64_t state_elements,
                                  size_t state_buffers) {
  if (lent_.empty()) return false;
  std::vector<int64_t> sizes(state_buffers + 1, state_elements);
  sizes[0] = params_elements;
  std::vector<Spans> parts = LayOut(lent_, sizes);
  if (parts.empty()) return false;
  lent_copy_.params_elements = params_elements;
  lent_copy_.state_elements = state_elements;
  lent_copy_.parts = std::move(parts);
  return true;
}

absl::Status RingStateCopies::CopyParts(const std::vector<Spans>& from,
                                        const std::vector<bool>& current,
                                        int64_t steps, Copy& to) {
  to.steps = -1;
  for (size_t k = 0; k < from.size() && k < to.parts.size(); ++k) {
    RETURN_IF_ERROR(CopyAcross(*backend_, from[k], to.parts[k]));
  }
  to.current = current;
  to.steps = steps;
  return absl::OkStatus();
}

absl::Status RingStateCopies::CopyInto(const RingState& state, Copy& copy) {
  const int64_t params = ParamsElements(state);
  if (&copy != &lent_copy_) {
    RETURN_IF_ERROR(Shape(copy, params,
                          static_cast<int64_t>(state.optimizer->size()),
                          state.optimizer->StateBuffers().size()));
  }
  return CopyParts(
      LiveParts(state, params),
      state.current != nullptr ? *state.current : std::vector<bool>(),
      state.optimizer->steps_applied(), copy);
}

RingStateCopies::Copy& RingStateCopies::SlotFor(int64_t steps) {
  const int64_t committed = committed_.load();
  Copy* unallocated = nullptr;
  Copy* oldest = nullptr;
  for (Copy& copy : rollback_) {
    if (copy.storage.empty()) {
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
  // Lent memory unless it holds a copy still needed (TakeBackLent was not
  // called since) or the state does not fit.
  const bool lent = (!LentCopyPending() || lent_copy_.steps == steps) &&
                    PlaceInLent(ParamsElements(state),
                                static_cast<int64_t>(state.optimizer->size()),
                                state.optimizer->StateBuffers().size());
  // Copies of their own that the lent memory made unneeded go (a copy
  // moved out while a step was not committed in time).
  if (lent) DropCommitted();
  Copy& rollback = lent ? lent_copy_ : SlotFor(steps);
  RETURN_IF_ERROR(CopyInto(state, rollback));
  newest_copy_bytes_ = rollback.bytes();
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
  if (found == nullptr && lent_copy_.steps == steps) found = &lent_copy_;
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
  const int64_t params = ParamsElements(state);
  if (copy.params_elements != params ||
      copy.parts.size() != optimizer.StateBuffers().size() + 1 ||
      (copy.parts.size() > 1 &&
       copy.state_elements != static_cast<int64_t>(optimizer.size()))) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the copy of the state after %d steps is of another slice", steps));
  }
  const std::vector<Spans> live = LiveParts(state, params);
  for (size_t k = 0; k < live.size(); ++k) {
    RETURN_IF_ERROR(CopyAcross(*backend_, copy.parts[k], live[k]));
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
  if (lent_copy_.steps > steps) lent_copy_.steps = -1;
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
    if (!copy.storage.empty() && copy.steps < committed) copy = Copy{};
  }
  if (lent_copy_.steps < committed) lent_copy_.steps = -1;
}

void RingStateCopies::Lend(std::vector<absl::Span<float>> free) {
  lent_ = std::move(free);
}

bool RingStateCopies::LentCopyPending() const {
  return lent_copy_.steps >= 0 && lent_copy_.steps >= committed_.load();
}

absl::Status RingStateCopies::TakeBackLent() {
  if (LentCopyPending()) {
    Copy& slot = SlotFor(lent_copy_.steps);
    RETURN_IF_ERROR(Shape(slot, lent_copy_.params_elements,
                          lent_copy_.state_elements,
                          lent_copy_.parts.size() - 1));
    RETURN_IF_ERROR(CopyParts(lent_copy_.parts, lent_copy_.current,
                              lent_copy_.steps, slot));
    ++spills_;
  }
  lent_copy_ = Copy{};
  lent_.clear();
  return absl::OkStatus();
}

void RingStateCopies::Forget() {
  for (Copy& copy : rollback_) copy.steps = -1;
  for (Copy& copy : checkpoint_) copy.steps = -1;
  lent_copy_.steps = -1;
}

int RingStateCopies::rollback_copies() const {
  int allocated = 0;
  for (const Copy& copy : rollback_) allocated += copy.storage.empty() ? 0 : 1;
  return allocated;
}

int64_t RingStateCopies::copy_bytes() const { return newest_copy_bytes_; }

}  // namespace ferry

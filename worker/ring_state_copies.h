// RingStateCopies: the states a ring member (RingExchange,
// worker/ring_exchange.h) keeps so that a new ring generation can start
// from the state after exactly the lease's step.
//
// Before a step is applied its state (params, optimizer state and step
// count, and a ring pipeline's current-stage flags) is copied:
//  - into one of kRollbackCopies rollback copies: a free one, else one of a
//    state before the coordinator's committed steps (ObserveCommitted: never
//    re-formed, so never needed again), else one not allocated yet, else
//    the oldest. A member whose coordinator keeps up allocates one copy
//    instead of three.
//  - for a lease with keep_state (hybrid mode's checkpoint versions), also
//    into the older of kCheckpointCopies checkpoint copies, which committed
//    steps never free (a shard killed while writing the newest checkpoint
//    comes back from the one before).
// RestoreTo puts a kept state back and drops the copies of later states
// (the undone history).
//
// Ownership: owns the copies (backend buffers); the backend and the live
// state (RingState) are not owned and outlive it.
// Thread safety: one thread (the training loop's) uses it, except
// ObserveCommitted() and committed(), which any thread may call.
#ifndef FERRY_WORKER_RING_STATE_COPIES_H_
#define FERRY_WORKER_RING_STATE_COPIES_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "compute/compute_backend.h"
#include "compute/optimizer.h"

namespace ferry {

// The live state copies are taken of and restored into (not owned):
// `params_elements` floats at params (-1: the copies' n) and every
// optimizer state buffer (optimizer->size() floats). A member with sharded
// optimizer state passes its slice of the params and its slice's optimizer.
struct RingState {
  float* params = nullptr;
  Optimizer* optimizer = nullptr;
  // A ring pipeline's stages held current (empty: not a pipeline job).
  std::vector<bool>* current = nullptr;
  int64_t params_elements = -1;
};

class RingStateCopies {
 public:
  static constexpr int kRollbackCopies = 3;
  static constexpr int kCheckpointCopies = 2;

  // `backend` (not owned) holds the state; `n` is the elements of params
  // unless a RingState says otherwise. `committed_steps_final`: whether
  // ObserveCommitted's steps free copies (false: it is ignored).
  RingStateCopies(ComputeBackend* backend, int64_t n,
                  bool committed_steps_final)
      : backend_(backend),
        n_(n),
        committed_steps_final_(committed_steps_final) {}

  // Copies `state` (after state.optimizer->steps_applied() steps, before the
  // next is applied) into a rollback copy and, when `checkpoint`, into the
  // older checkpoint copy unless one holds that step already. The backend's
  // errors (allocation, copy).
  absl::Status Keep(const RingState& state, bool checkpoint);

  // OK when a copy of the state after `steps` steps is kept, else
  // FAILED_PRECONDITION saying so (`applied`: the steps the live state has).
  absl::Status CheckKept(int64_t steps, int64_t applied) const;

  // Puts `state` back to the copy of the state after `steps` steps (params,
  // optimizer state and step count; the current-stage flags when the copy
  // has as many) and drops the copies of later states. FAILED_PRECONDITION
  // when no copy of that state is kept; the backend's errors.
  absl::Status RestoreTo(int64_t steps, const RingState& state);

  // Any thread: the coordinator applied and saved the first `steps` steps;
  // copies of states before them may be taken for new copies. A no-op
  // unless committed_steps_final.
  void ObserveCommitted(int64_t steps);
  // Any thread: the newest committed step count observed.
  int64_t committed() const { return committed_.load(); }

  // Frees the rollback copies of states before the committed steps (before
  // a snapshot takes a model's memory).
  void DropCommitted();

  // Forgets every copy (the live state was loaded from elsewhere: a ring
  // checkpoint); their memory stays allocated.
  void Forget();

  // The rollback copies allocated (checkpoint copies not counted).
  int rollback_copies() const;
  // The bytes of the largest rollback copy allocated (0: none yet).
  int64_t copy_bytes() const;

 private:
  struct Copy {
    int64_t steps = -1;  // -1: empty
    DeviceBuffer params;
    std::vector<DeviceBuffer> state;
    std::vector<bool> current;
  };
  // The copy of the state after `steps` steps (a rollback copy first), or
  // nullptr.
  const Copy* Find(int64_t steps) const;
  // The rollback copy to take the state after `steps` steps.
  Copy& SlotFor(int64_t steps);
  absl::Status CopyInto(const RingState& state, Copy& copy);
  int64_t ParamsElements(const RingState& state) const {
    return state.params_elements < 0 ? n_ : state.params_elements;
  }

  ComputeBackend* const backend_;
  const int64_t n_;
  const bool committed_steps_final_;
  std::atomic<int64_t> committed_{0};
  Copy rollback_[kRollbackCopies];
  Copy checkpoint_[kCheckpointCopies];
};

}  // namespace ferry

#endif  // FERRY_WORKER_RING_STATE_COPIES_H_

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
// Lent memory: an owner may lend memory it does not use until a point it
// names (a sharded ring member's gradient buffer outside its slice, from
// the step's reduce until the next step's backward pass). While lent, a
// rollback copy that fits goes there instead of into a copy of its own;
// when the memory is taken back, a copy there that may still be needed
// (its state not before the committed steps) moves into one of its own,
// so a member whose steps are committed before its next backward pass
// holds no rollback copy of its own.
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
#include "absl/types/span.h"
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

  // Lends `free` (disjoint ranges of the backend's memory, not owned) for
  // the next rollback copies until TakeBackLent(); replaces an earlier
  // loan (call TakeBackLent first when it holds a copy).
  void Lend(std::vector<absl::Span<float>> free);
  // The lent memory is about to be written: a copy there that may still be
  // needed moves into a rollback copy of its own (allocated if need be; a
  // spill, counted); then nothing is lent. The backend's errors (the copy
  // then stays where it is and the memory stays lent).
  absl::Status TakeBackLent();
  // Whether the lent memory holds a copy that TakeBackLent would move now
  // (its state not before the committed steps).
  bool LentCopyPending() const;
  // Copies moved out of lent memory so far.
  int64_t spills() const { return spills_; }

  // Forgets every copy (the live state was loaded from elsewhere: a ring
  // checkpoint); their memory stays allocated.
  void Forget();

  // The rollback copies allocated (checkpoint copies and the lent memory's
  // not counted).
  int rollback_copies() const;
  // The bytes of the newest rollback copy kept, in memory of its own or
  // lent (0: none yet).
  int64_t copy_bytes() const;

 private:
  // Where a kept state's parts are: params (parts[0], params_elements
  // floats) and each optimizer state buffer (parts[1...], state_elements
  // floats each), each part as spans back to back: one span of `storage`
  // (a copy of its own) or spans of the lent memory.
  struct Copy {
    int64_t steps = -1;  // -1: empty
    int64_t params_elements = 0;
    int64_t state_elements = 0;
    std::vector<std::vector<absl::Span<float>>> parts;  // empty: no memory
    std::vector<bool> current;
    std::vector<DeviceBuffer> storage;  // parts' memory, unless lent
    int64_t bytes() const;
  };
  // The copy of the state after `steps` steps (a rollback copy first), or
  // nullptr.
  const Copy* Find(int64_t steps) const;
  // The rollback copy of its own to take the state after `steps` steps.
  Copy& SlotFor(int64_t steps);
  // Gives `copy` memory of its own for a state of these sizes unless it
  // has it already.
  absl::Status Shape(Copy& copy, int64_t params_elements,
                     int64_t state_elements, size_t state_buffers);
  // Lays the lent copy's parts out over the lent memory for a state of
  // these sizes; false when it does not fit.
  bool PlaceInLent(int64_t params_elements, int64_t state_elements,
                   size_t state_buffers);
  // Copies `from`'s values into `to` (shaped alike) as the state after
  // `steps` steps.
  absl::Status CopyParts(
      const std::vector<std::vector<absl::Span<float>>>& from,
      const std::vector<bool>& current, int64_t steps, Copy& to);
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
  std::vector<absl::Span<float>> lent_;
  Copy lent_copy_;  // in lent_ (steps -1 when nothing is lent)
  int64_t newest_copy_bytes_ = 0;
  int64_t spills_ = 0;
};

}  // namespace ferry

#endif  // FERRY_WORKER_RING_STATE_COPIES_H_

// ShardSlice: a PS shard's dense part: its slice of the parameters, the
// optimizer (and its state) on a compute backend, and the version.
// Applies updates, hands out snapshots, and reads, checks and replaces the
// state for checkpoints and restores.
//
// Versions: version() counts the updates applied since version 0 or the
// version restored.
//
// Memory: the slice is held once. The current snapshot IS the slice: an
// update writes it in place when no reader holds it, and copies it first
// (copy on write, into the last snapshot's memory once free) only when a
// reader still holds the previous version. A snapshot handed out is never
// written again.
//
// Not thread-safe: the shard guards it with its mutex, and hands out
// snapshots only under it (what makes SoleOwner's test sound).
#ifndef FERRY_PS_SHARD_SLICE_H_
#define FERRY_PS_SHARD_SLICE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "compute/compute_backend.h"
#include "compute/optimizer.h"
#include "ps/shard_state.h"

namespace ferry {

class ShardSlice {
 public:
  // `optimizer` runs on `backend` over the slice `params` (its size).
  // `shard_id` names the shard in messages.
  ShardSlice(int32_t shard_id, std::unique_ptr<ComputeBackend> backend,
             Optimizer optimizer, std::vector<float> params);

  int64_t version() const { return version_; }
  // The slice at version(), immutable from now on.
  std::shared_ptr<const PsSnapshot> snapshot() const { return current_; }

  // Applies `grad` (already averaged; the slice's size) with the optimizer,
  // its learning rates times `lr_scale`, and bumps the version. INTERNAL
  // naming the shard when the optimizer fails (the version stays). `skip`:
  // slice elements no contributor's gradient holds (Optimizer::Apply).
  absl::Status Apply(const float* grad, double lr_scale = 1.0,
                     absl::Span<const FlatRange> skip = {});

  // Sets `view`'s version, optimizer steps, params (in place) and
  // optimizer state (in place on a host-memory backend, else host copies
  // held by the view). INTERNAL when the state cannot be copied off the
  // backend.
  absl::Status FillView(PsShardStateView& view);

  // FAILED_PRECONDITION naming the version unless `expected_version` < 0 or
  // is version().
  absl::Status CheckVersion(int64_t expected_version) const;
  // OK when `state`'s dense part fits this slice: INVALID_ARGUMENT for a
  // negative version or steps or a non-finite value; FAILED_PRECONDITION
  // for params or optimizer buffers of another size, or another number of
  // optimizer buffers. (state.tables are not looked at.)
  absl::Status CheckState(const PsShardState& state);
  // Replaces the optimizer state and steps, the params and the version
  // with `state`'s. REQUIRES: CheckState(state) is OK. INTERNAL when the
  // optimizer state cannot be copied to the backend (then nothing but some
  // of the optimizer buffers changed).
  absl::Status Restore(const PsShardState& state);

 private:
  // The slice, for writing: current_ itself when no reader holds it, else
  // a new current_ (in spare_'s memory when there is one) that holds a
  // copy of the values when `keep_values` (else they are unspecified, for
  // a caller that overwrites them all).
  std::vector<float>& WritableParams(bool keep_values);

  const int32_t shard_id_;
  std::unique_ptr<ComputeBackend> backend_;
  Optimizer optimizer_;
  // The slice at version_ (current_->version == version_), shared with the
  // readers of that version: never written while they hold it.
  std::shared_ptr<PsSnapshot> current_;
  // An older slice copied on write: its memory serves the next copy once
  // no reader holds it.
  std::shared_ptr<PsSnapshot> spare_;
  int64_t version_ = 0;
};

}  // namespace ferry

#endif  // FERRY_PS_SHARD_SLICE_H_

// RingExchange with sharded optimizer state (ZeRO stage 1,
// worker/ring_exchange.h): each member's slice of the optimizer state, the
// step that updates it, and the hand-over of the slices into a new ring.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "common/log.h"
#include "common/range_sets.h"
#include "common/sharding.h"
#include "common/status_macros.h"
#include "worker/ring_exchange.h"

namespace ferry {
namespace {

// Op id of the join's exchange of which slices the members hold (the
// broadcast's id in an unsharded ring).
constexpr int64_t kHoldersOp = 0;
// Elements of one optimizer state slice per broadcast at a join.
constexpr int64_t kSliceChunkElements = int64_t{1} << 20;
// Per member at a join: holds a slice (0/1), its ring generation, that
// ring's size and the member's rank in it.
constexpr int kHolderFields = 4;

}  // namespace

absl::StatusOr<Optimizer> RingExchange::SliceOptimizer(
    const RingExchangeOptions& options, int64_t n, FlatRange slice) {
  // The BatchNorm state at the end of the buffer is not trained.
  const int64_t trainable_end = n - options.state_elements;
  const int64_t trainable =
      std::clamp<int64_t>(trainable_end - slice.begin, 0, slice.size());
  return Optimizer::Create(options.optimizer, options.backend,
                           static_cast<size_t>(slice.size()),
                           static_cast<size_t>(trainable), slice.begin);
}

std::vector<FlatRange> RingExchange::RingSlices(int size) const {
  std::vector<FlatRange> slices;
  for (int q = 0; q < size; ++q) slices.push_back(ShardRange(n_, size, q));
  return slices;
}

absl::Status RingExchange::JoinShardedRing(const v1::NextTaskResponse& lease) {
  const int64_t steps = lease.step();
  if (held_.size > 0 && optimizer_.steps_applied() > steps) {
    if (absl::Status rolled = RollBackTo(steps); !rolled.ok()) {
      LogWarn("ring: this member's optimizer state slice cannot go back",
              {{"resume_step", steps}, {"why", std::string(rolled.message())}});
      held_ = {};
    }
  }
  const bool holds = held_.size > 0 && optimizer_.steps_applied() == steps;
  const FlatRange next_slice = ShardRange(n_, lease.ring_size(), lease.rank());
  ASSIGN_OR_RETURN(Optimizer next, SliceOptimizer(options_, n_, next_slice));
  RingCollective& collective = *session_->collective;
  if (lease.has_restore_checkpoint()) {
    // Every member loads its own slice (and the params).
    RETURN_IF_ERROR(
        RestoreCheckpoint(lease.restore_checkpoint(), next, next_slice));
  } else if (steps == 0) {
    // The job's start: rank 0's params (an all-gather from rank 0 alone is
    // a chain broadcast, staged like the step's), the state at zero.
    std::vector<FlatRange> from_rank0(static_cast<size_t>(lease.ring_size()));
    from_rank0[0] = {0, n_};
    RETURN_IF_ERROR(
        AllGatherParams(collective, session_->next_op++, from_rank0));
  } else {
    RETURN_IF_ERROR(GatherSlices(collective, steps, holds, next_slice, next));
    next.set_steps_applied(steps);
  }
  optimizer_ = std::move(next);
  slice_ = next_slice;
  held_ = {lease.ring_generation(), lease.ring_size(), lease.rank()};
  copies_.Forget();  // of the old slice
  return absl::OkStatus();
}

absl::Status RingExchange::GatherSlices(RingCollective& collective,
                                        int64_t steps, bool holds,
                                        FlatRange next_slice, Optimizer& next) {
  const int size = collective.size();
  const int rank = collective.rank();
  std::vector<float> holders(static_cast<size_t>(size) * kHolderFields, 0.0f);
  if (holds) {
    float* mine = holders.data() + rank * kHolderFields;
    mine[0] = 1.0f;
    mine[1] = static_cast<float>(held_.generation);
    mine[2] = static_cast<float>(held_.size);
    mine[3] = static_cast<float>(held_.rank);
  }
  RETURN_IF_ERROR(collective.AllReduceSum(
      kHoldersOp, holders.data(), static_cast<int64_t>(holders.size())));
  // The newest generation's holders, one per old slice (the lowest rank).
  float newest = -1.0f;
  for (int q = 0; q < size; ++q) {
    const float* h = holders.data() + q * kHolderFields;
    if (h[0] > 0.0f) newest = std::max(newest, h[1]);
  }
  int old_size = 0;
  for (int q = 0; q < size && old_size == 0; ++q) {
    const float* h = holders.data() + q * kHolderFields;
    if (h[0] > 0.0f && h[1] == newest) old_size = static_cast<int>(h[2]);
  }
  std::vector<int> holder_of(static_cast<size_t>(old_size), -1);
  for (int q = 0; q < size; ++q) {
    const float* h = holders.data() + q * kHolderFields;
    const int old_rank = static_cast<int>(h[3]);
    if (h[0] > 0.0f && h[1] == newest && static_cast<int>(h[2]) == old_size &&
        old_rank >= 0 && old_rank < old_size && holder_of[old_rank] < 0) {
      holder_of[old_rank] = q;
    }
  }
  std::vector<int> missing;
  for (int o = 0; o < old_size; ++o) {
    if (holder_of[o] < 0) missing.push_back(o);
  }
  if (old_size == 0 || !missing.empty()) {
    return absl::AbortedError(absl::StrCat(
        "no member of this ring holds ",
        old_size == 0 ? "any slice"
                      : absl::StrCat("slice(s) ", absl::StrJoin(missing, ", "),
                                     " of ", old_size),
        " of the sharded optimizer state after ", steps,
        " steps (their members are gone): the job must go back to a ring "
        "checkpoint"));
  }
  // The params: every holder's slice of them to everyone.
  std::vector<FlatRange> owned(static_cast<size_t>(size));
  for (int o = 0; o < old_size; ++o) {
    owned[holder_of[o]] = ShardRange(n_, old_size, o);
  }
  RETURN_IF_ERROR(AllGatherParams(collective, session_->next_op++, owned));
  // The optimizer state: each old slice from its holder, chunk by chunk;
  // a chunk only some other member's new slice needs travels (every member
  // knows every slice, so all skip the same ones).
  const std::vector<DeviceBuffer*> from = optimizer_.StateBuffers();
  const std::vector<DeviceBuffer*> to = next.StateBuffers();
  const int64_t buffers = static_cast<int64_t>(to.size());
  if (buffers == 0) return absl::OkStatus();
  const std::vector<FlatRange> next_slices = RingSlices(size);
  ComputeBackend* backend = options_.backend;
  std::vector<float> chunk;
  for (int o = 0; o < old_size; ++o) {
    const FlatRange old = ShardRange(n_, old_size, o);
    const int root = holder_of[o];
    for (int64_t c = old.begin; c < old.end; c += kSliceChunkElements) {
      const int64_t len = std::min(kSliceChunkElements, old.end - c);
      bool needed = false;
      for (int q = 0; q < size; ++q) {
        needed = needed || (q != root && next_slices[q].begin < c + len &&
                            next_slices[q].end > c);
      }
      chunk.resize(static_cast<size_t>(len * buffers));
      if (rank == root) {
        for (int64_t k = 0; k < buffers; ++k) {
          RETURN_IF_ERROR(backend->CopyToHost(from[k]->data() + (c - old.begin),
                                              len, chunk.data() + k * len));
        }
      }
      if (needed) {
        RETURN_IF_ERROR(collective.Broadcast(session_->next_op++, chunk.data(),
                                             len * buffers, root));
      }
      const int64_t b = std::max(c, next_slice.begin);
      const int64_t e = std::min(c + len, next_slice.end);
      for (int64_t k = 0; b < e && k < buffers; ++k) {
        RETURN_IF_ERROR(
            backend->CopyToDevice(chunk.data() + k * len + (b - c), e - b,
                                  to[k]->data() + (b - next_slice.begin)));
      }
    }
  }
  return backend->Synchronize();
}

absl::Status RingExchange::AllGatherParams(
    RingCollective& collective, int64_t op,
    const std::vector<FlatRange>& owned) {
  ComputeBackend* backend = options_.backend;
  if (backend->IsHostMemory()) {
    return collective.AllGather(op, options_.params, n_, owned);
  }
  std::vector<float> host(static_cast<size_t>(n_));
  RETURN_IF_ERROR(backend->CopyToHost(options_.params, n_, host.data()));
  RETURN_IF_ERROR(collective.AllGather(op, host.data(), n_, owned));
  RETURN_IF_ERROR(backend->CopyToDevice(host.data(), n_, options_.params));
  return backend->Synchronize();
}

absl::Status RingExchange::FinishShardedStep() {
  if (absl::Status reduced = session_->reducer->Finish(); !reduced.ok()) {
    AbandonStep();
    return reduced;
  }
  absl::StatusOr<std::vector<FlatRange>> skip = AgreeOnAbsent();
  if (!skip.ok()) {
    AbandonStep();
    return skip.status();
  }
  const int64_t copy_bytes =
      slice_.size() *
      (1 + static_cast<int64_t>(optimizer_.StateBuffers().size())) *
      static_cast<int64_t>(sizeof(float));
  if (options_.grads_idle_between_steps && options_.committed_steps_final &&
      copy_bytes >= options_.prompt_commit_min_bytes) {
    // Reduced: the gradient outside the slice is not read again.
    copies_.Lend(
        {absl::MakeSpan(options_.grads, slice_.begin),
         absl::MakeSpan(options_.grads + slice_.end, n_ - slice_.end)});
  }
  RETURN_IF_ERROR(copies_.Keep(LiveState(), keep_state_));
  // This member's slice of the mean gradient through its optimizer.
  ComputeBackend* backend = options_.backend;
  const int64_t begin = slice_.begin;
  const int64_t len = slice_.size();
  if (!backend->IsHostMemory()) {
    RETURN_IF_ERROR(backend->CopyToDevice(options_.host_grads + begin, len,
                                          options_.grads + begin));
  }
  RETURN_IF_ERROR(backend->Scale(len, 1.0f / static_cast<float>(step_samples_),
                                 options_.grads + begin));
  RETURN_IF_ERROR(
      optimizer_.Apply(options_.grads + begin, options_.params + begin, 1.0,
                       ClipRangeSet(*skip, slice_.begin, slice_.end)));
  // Everyone's updated slice to everyone. On failure the step stays
  // applied to this slice only: the next ring goes back to the copy.
  absl::Status gathered = AllGatherParams(
      *session_->collective, session_->gather_op, RingSlices(held_.size));
  if (!gathered.ok()) AbandonStep();
  return gathered;
}

}  // namespace ferry

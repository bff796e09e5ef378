// RingExchange's ring pipeline steps (worker/ring_exchange.h): one ring
// per stage, the stages' current ranges, and gathering every stage's
// weights into a new ring generation or at the end of the job.
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "worker/ring_exchange.h"

namespace ferry {

absl::Status RingExchange::GatherStages(RingCollective& collective,
                                        int64_t steps, int64_t first_op) {
  const int size = collective.size();
  const int rank = collective.rank();
  const int stages = static_cast<int>(stage_ranges_.size());
  // flags[r * stages + s] = 1: rank r holds stage s current after `steps`.
  std::vector<float> flags(static_cast<size_t>(size) * stages, 0.0f);
  const bool at_steps = optimizer_.steps_applied() == steps;
  for (int s = 0; s < stages; ++s) {
    if (at_steps && current_[s]) flags[rank * stages + s] = 1.0f;
  }
  RETURN_IF_ERROR(collective.AllReduceSum(first_op, flags.data(),
                                          static_cast<int64_t>(flags.size())));
  std::vector<DeviceBuffer*> state = optimizer_.StateBuffers();
  ComputeBackend* backend = options_.backend;
  for (int s = 0; s < stages; ++s) {
    int root = -1;
    for (int r = 0; r < size && root < 0; ++r) {
      if (flags[r * stages + s] > 0.0f) root = r;
    }
    if (root < 0) {
      root = 0;
      if (rank == 0) {
        LogWarn(
            "no ring member holds this pipeline stage's weights after the "
            "step the ring resumes from (its holders are all gone): it "
            "resumes from rank 0's older copy",
            {{"stage", s}, {"resume_step", steps}});
      }
    }
    // params[range], each state buffer's range, the step count (an int64 in
    // the bits of two floats).
    const FlatRange range = stage_ranges_[s];
    const int64_t len = range.size();
    const int64_t total = len * (1 + static_cast<int64_t>(state.size())) + 2;
    std::vector<float> host(total);
    if (rank == root) {
      RETURN_IF_ERROR(
          backend->CopyToHost(options_.params + range.begin, len, host.data()));
      for (size_t k = 0; k < state.size(); ++k) {
        RETURN_IF_ERROR(backend->CopyToHost(state[k]->data() + range.begin, len,
                                            host.data() + len * (k + 1)));
      }
      const int64_t have = optimizer_.steps_applied();
      std::memcpy(host.data() + total - 2, &have, sizeof(have));
    }
    RETURN_IF_ERROR(
        collective.Broadcast(first_op + 1 + s, host.data(), total, root));
    if (rank == root) continue;
    RETURN_IF_ERROR(
        backend->CopyToDevice(host.data(), len, options_.params + range.begin));
    for (size_t k = 0; k < state.size(); ++k) {
      RETURN_IF_ERROR(backend->CopyToDevice(host.data() + len * (k + 1), len,
                                            state[k]->data() + range.begin));
    }
    if (s == 0) {
      int64_t have = 0;
      std::memcpy(&have, host.data() + total - 2, sizeof(have));
      optimizer_.set_steps_applied(have);
    }
  }
  current_.assign(stages, true);
  return backend->Synchronize();
}

absl::Status RingExchange::OpenStageRings(const v1::NextTaskResponse& lease) {
  for (const ExchangeStep::StageRing& ring : step_rings_) {
    if (ring.stage < 0 ||
        ring.stage >= static_cast<int>(stage_ranges_.size())) {
      return absl::InvalidArgumentError(
          absl::StrFormat("ring step %d: stage ring %d of %d stages",
                          lease.step(), ring.stage, stage_ranges_.size()));
    }
    if (session_->stage_links.contains(ring.stage)) continue;
    // The stage's members as a ring of their own, this member at its index.
    v1::NextTaskResponse sub = lease;
    sub.clear_ring();
    int rank = -1;
    for (int r : ring.ranks) {
      if (r < 0 || r >= lease.ring_size()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("ring step %d: stage %d's ring names rank %d of %d",
                            lease.step(), ring.stage, r, lease.ring_size()));
      }
      if (r == lease.rank()) rank = sub.ring_size();
      *sub.add_ring() = lease.ring(r);
    }
    if (rank < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "ring step %d: stage %d's ring leaves out this member (rank %d)",
          lease.step(), ring.stage, lease.rank()));
    }
    sub.set_rank(rank);
    StageRingLink link;
    ASSIGN_OR_RETURN(link.transport, options_.connect(sub));
    RingCollectiveOptions copts;
    copts.timeout = options_.collective_timeout;
    link.collective =
        std::make_unique<RingCollective>(link.transport.get(), copts);
    absl::MutexLock lock(&cancel_mu_);
    session_->stage_links.emplace(ring.stage, std::move(link));
  }
  return absl::OkStatus();
}

std::vector<FlatRange> RingExchange::CurrentRanges() const {
  std::vector<FlatRange> ranges;
  for (size_t s = 0; s < stage_ranges_.size(); ++s) {
    if (current_[s]) ranges.push_back(stage_ranges_[s]);
  }
  return ranges;
}

absl::Status RingExchange::FinishStageStep() {
  if (declared_ != n_) {
    AbandonStep();
    return absl::FailedPreconditionError(absl::StrFormat(
        "ring step: %d of %d gradient elements declared", declared_, n_));
  }
  std::vector<Optimizer::Range> ranges;
  for (const ExchangeStep::StageRing& ring : step_rings_) {
    const FlatRange range = stage_ranges_[ring.stage];
    RingCollective& collective =
        *session_->stage_links.at(ring.stage).collective;
    const int64_t op = step_first_op_ + ring.stage;
    // The state (BatchNorm's statistics: the state ring's range) travels
    // exact, as in the bucket all-reduce.
    const bool exact = range.begin >= n_ - options_.state_elements;
    absl::Status reduced = collective.AllReduceSumCompressed(
        op, options_.host_grads + range.begin, range.size(),
        exact ? GradientCompression{} : options_.compression,
        exact || feedback_ == nullptr ? nullptr
                                      : feedback_->residual() + range.begin);
    if (!reduced.ok()) {
      AbandonStep();
      return absl::Status(reduced.code(),
                          absl::StrCat("pipeline stage ", ring.stage,
                                       "'s ring: ", reduced.message()));
    }
    ranges.push_back(
        {static_cast<size_t>(range.begin), static_cast<size_t>(range.end)});
  }
  RETURN_IF_ERROR(copies_.Keep(LiveState(), keep_state_));
  RETURN_IF_ERROR(ApplyDense(&ranges));
  // The other stages' ranges here are now a step behind.
  std::vector<bool> reduced(stage_ranges_.size(), false);
  for (const ExchangeStep::StageRing& ring : step_rings_) {
    reduced[ring.stage] = true;
  }
  for (size_t s = 0; s < current_.size(); ++s) {
    current_[s] = current_[s] && reduced[s];
  }
  return absl::OkStatus();
}

absl::Status RingExchange::EndOfTraining() {
  if (session_ == nullptr || !session_->per_stage) return absl::OkStatus();
  TakeBackWeights();  // the gather writes the params
  const int64_t op = session_->next_op;
  session_->next_op += 1 + static_cast<int64_t>(stage_ranges_.size());
  absl::Status gathered =
      GatherStages(*session_->collective, optimizer_.steps_applied(), op);
  if (!gathered.ok()) AbandonStep();
  return gathered;
}

}  // namespace ferry

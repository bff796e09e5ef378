// Ring checkpoints (see coordinator.h and common/ring_checkpoint.h): the
// coordinator picks the steps whose members write one, records a checkpoint
// once every member of its step wrote its part, and takes a ring that lost
// every member holding the job's state back to the newest one.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "coordinator/coordinator.h"
#include "coordinator/ring_resume.h"
#include "pipeline/ring_pipeline_roles.h"

namespace ferry {

std::optional<int64_t> Coordinator::ResumeRingIfStateLost(
    const std::vector<const Member*>& ranked) {
  if (!rules_.members_hold_weights() || !steps_.open().empty())
    return std::nullopt;
  const bool all_lost = RingLostTheJobState(ranked, steps_applied_);
  // A ring pipeline may lose one stage only: every member that trained it
  // is gone while others live on.
  const bool stage_lost =
      !all_lost && pipeline_ranges_ > 0 &&
      RingLostAHeldRange(ranked, pipeline_ranges_, steps_applied_);
  // Sharded optimizer state: every slice lives on one member only.
  const bool slice_lost =
      !all_lost && optimizer_slices_ > 0 &&
      RingLostAHeldRange(ranked, optimizer_slices_, steps_applied_);
  if (!all_lost && !stage_lost && !slice_lost) return std::nullopt;
  const char* part = stage_lost   ? "a pipeline stage's state"
                     : slice_lost ? "a slice of the sharded optimizer state"
                                  : "the job's state";
  // Hybrid: the shards' tables must go back with the dense layers, to a
  // version both halves have a checkpoint of.
  const bool hybrid = rules_.ring_beside_shards();
  const std::optional<RingResumePoint> point = RingResumeTarget(
      hybrid ? recovery_.CheckpointsOfBothHalves() : recovery_.checkpoints(),
      steps_applied_, recovery_.first_step(steps_applied_));
  // Survivors hold newer stages: only a checkpoint brings every stage back
  // to one step (none of them holds the initial state any more).
  if (!point.has_value() ||
      ((stage_lost || slice_lost) && !point->from_checkpoint)) {
    if (error_.empty()) {
      const char* why_none = ring_checkpoints_
                                 ? "none was completed"
                                 : "the job has no --ring-checkpoint-dir";
      error_ = absl::StrCat(
          "every ring member that held ", part, " after ", steps_applied_,
          " steps is gone and no ring checkpoint of this epoch is left (",
          why_none,
          "): training on from the new members' state would count steps "
          "the weights do not hold");
      LogWarn(error_);
      AddEvent("ring_state_lost", "", steps_applied_, 0, error_);
    }
    return std::nullopt;
  }
  const int64_t from = steps_applied_;
  RollBackAccounting(point->version);
  // After the resume's gather every member holds every range; with
  // sharded state, each member loads the slice of its rank.
  for (size_t rank = 0; rank < ranked.size(); ++rank) {
    Member* member = membership_.Find(ranked[rank]->id);
    member->held_ranges.clear();
    for (int r = 0; r < pipeline_ranges_; ++r) member->held_ranges.push_back(r);
    if (optimizer_slices_ > 0)
      member->held_ranges.push_back(static_cast<int>(rank));
  }
  if (optimizer_slices_ > 0)
    optimizer_slices_ = static_cast<int>(ranked.size());
  const std::string resumed = absl::StrCat(
      "no member holds ", part, ": the ring goes on from ",
      point->from_checkpoint ? "the ring checkpoint at "
                             : "the initial state, ",
      point->version,
      from != point->version
          ? absl::StrCat(" (steps ", point->version, "-", from - 1, " undone)")
          : "");
  if (hybrid && from != point->version) {
    // The shards are at `from` (no step is open): back to the version, by
    // the finalizer's recovery (RecoverShards restores every shard to it:
    // a shards' checkpoint at the job's applied steps). The next call,
    // with the shards there, restores the ring and says so.
    if (!point->from_checkpoint)  // no next call
      AddEvent("ring_resumed", "", point->version, 0, resumed);
    recovery_state_.Require(
        absl::StrCat("every ring member is gone: the shards go back to ",
                     point->version, " with the ring's dense layers"));
    return std::nullopt;
  }
  if (from != point->version || point->from_checkpoint)
    AddEvent("ring_resumed", "", point->version, 0, resumed);
  if (!point->from_checkpoint) return std::nullopt;
  return point->version;
}

void Coordinator::NoteRangesHeld(const OpenStep& step) {
  if (options_.job.ring_shard_optimizer_state()) {
    for (auto& [id, member] : membership_.mutable_members()) {
      member.held_ranges.clear();
    }
    for (size_t rank = 0; rank < step.slots.size(); ++rank) {
      Member* m = membership_.Find(step.slots[rank].worker_id);
      if (m != nullptr) m->held_ranges.push_back(static_cast<int>(rank));
    }
    optimizer_slices_ = static_cast<int>(step.slots.size());
    return;
  }
  if (pipeline_ranges_ == 0) return;
  const std::vector<std::vector<int>> holders =
      StageHoldersOf(static_cast<int>(step.slots.size()),
                     options_.job.pipeline_stages(), pipeline_state_ring_);
  for (size_t rank = 0; rank < step.slots.size(); ++rank) {
    Member* m = membership_.Find(step.slots[rank].worker_id);
    if (m == nullptr) continue;
    m->held_ranges.clear();
    for (size_t range = 0; range < holders.size(); ++range) {
      if (std::find(holders[range].begin(), holders[range].end(),
                    static_cast<int>(rank)) != holders[range].end())
        m->held_ranges.push_back(static_cast<int>(range));
    }
  }
}

bool Coordinator::RingCheckpointDue(int64_t samples, int64_t remaining) const {
  if (!ring_checkpoints_) return false;
  const int64_t version = steps_.formed() + 1;
  const int64_t every = options_.checkpoint_every;
  const int64_t max_steps = options_.job.max_steps();
  // With sharded optimizer state a lost member's slice exists only in a
  // checkpoint: the first step writes one too.
  return (every > 0 && version % every == 0) || samples >= remaining ||
         (max_steps > 0 && version == max_steps) ||
         (options_.job.ring_shard_optimizer_state() && version == 1);
}

void Coordinator::NoteRingCheckpointReport(OpenStep& step, Slot& slot,
                                           const v1::StepReport& done) {
  if (!done.restore_error().empty() && step.restore.has_value()) {
    const int64_t version = *step.restore;
    if (rules_.ring_beside_shards()) {
      recovery_.DropRingCheckpointsFrom(version);
    } else {
      recovery_.DropCheckpointsFrom(version);
    }
    AddEvent("ring_restore_failed", slot.worker_id, version, 0,
             absl::StrCat("the ring checkpoint at ", version,
                          " cannot be loaded: ", done.restore_error(),
                          "; an older one is tried"));
    return;
  }
  if (!step.checkpoint || done.failed()) return;
  slot.checkpoint_written = done.checkpoint_written();
  if (!done.checkpoint_error().empty()) {
    AddEvent("ring_checkpoint_failed", slot.worker_id, step.step + 1, 0,
             done.checkpoint_error());
  }
}

void Coordinator::RecordRingCheckpoint(const OpenStep& step) {
  if (!step.checkpoint) return;
  for (const Slot& s : step.slots) {
    if (!s.checkpoint_written) return;  // its failure is an event already
  }
  const int64_t version = step.step + 1;
  if (rules_.ring_beside_shards()) {
    recovery_.AddRingCheckpoint(version);  // the shards' are their own
  } else {
    recovery_.AddCheckpoint(version);
  }
  AddEvent("ring_checkpoint", "", version, 0,
           absl::StrCat(step.slots.size(), " parts in ",
                        options_.job.ring_checkpoint_dir()));
  PersistDurably();
}

}  // namespace ferry

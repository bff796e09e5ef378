// What a job's settings decide about its steps, in one place: the
// coordinator asks these questions instead of testing the mode, the
// consistency or the pipeline depth itself. Pure and computed once per job.
#ifndef FERRY_COORDINATOR_STEP_RULES_H_
#define FERRY_COORDINATOR_STEP_RULES_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "ferry/v1/coordinator.pb.h"

namespace ferry {

class StepRules {
 public:
  // The rules of `job`; `finalize_on_push`: the coordinator's option to let
  // the shards apply a step as its last push arrives (where the job allows
  // it). INVALID_ARGUMENT for a combination no job runs: ring and hybrid
  // jobs with async/ssp consistency or a sync quorum; a pipeline with
  // async/ssp consistency or hybrid mode.
  static absl::StatusOr<StepRules> For(const v1::JobSpec& job,
                                       bool finalize_on_push);

  // Sync steps (steps are formed, finalized and applied as a whole) rather
  // than async/ssp tasks applied one by one.
  bool sync() const { return sync_; }
  // SSP: a worker may not get more than `staleness` tasks ahead.
  bool bounded_staleness() const { return ssp_; }
  // PS shards hold (some of) the state: they checkpoint, restore and
  // apply. False in ring mode.
  bool has_shards() const { return has_shards_; }
  // The shards apply the sync steps the coordinator finalizes (sync PS and
  // hybrid): steps in doubt are settled and open steps rolled back there.
  bool shards_apply_finalized_steps() const { return has_shards_ && sync_; }
  // The members hold the (dense) weights and form a ring: every member is
  // in every step, with or without samples, the job's evaluation fetches
  // the weights from a member, and FINISH waits until it has.
  bool members_hold_weights() const { return ring_; }
  // A lease names the step's members (a ring, or a pipeline replica's
  // stages), with each member's samples in a pipeline.
  bool leases_name_members() const { return ring_ || pipeline_; }
  bool members_carry_their_tasks() const { return pipeline_; }
  // A step one member cannot finish is aborted for all (and rolled back on
  // the shards): ring and pipeline jobs, and sync PS whose shards sum on
  // arrival (a summed push cannot be taken out of a step).
  bool lost_member_aborts_step() const { return aborts_; }
  // A step's members that pushed to the shards may be applied past a
  // recovery as they stand (their slots are the set the shards applied on
  // push): the jobs above that have no ring.
  bool steps_recoverable_from_shards() const { return aborts_ && !ring_; }
  // PS pipeline jobs: a member without samples of its own still pushes (its
  // stage's gradient of its replica's samples), so it is in the step's
  // contributor set with 0 samples.
  bool pushes_without_samples() const { return pipeline_ && !ring_; }
  // The shards apply a step as its last push arrives, the leases naming
  // its contributors: sync PS (and hybrid) without a quorum, where the
  // coordinator allows it.
  bool finalize_on_push() const { return finalize_on_push_; }
  // Hybrid: the dense layers live on the ring and the tables on the
  // shards. A finalize is fenced by the ring generation its step was
  // formed in (a join aborts nothing in a ring), the shards need no fence
  // of their own, and the members keep their dense state at the versions
  // the shards checkpoint.
  bool ring_beside_shards() const { return hybrid_; }
  // Finalize on push without a ring: the shards hear of every new
  // generation from the coordinator (a step applied on push raises no
  // fence before the next lease is pulled for).
  bool fence_shards_per_generation() const {
    return finalize_on_push_ && !hybrid_;
  }
  // How many of a step's `members` (in rank order) get samples: all,
  // except in a PS pipeline job with a worker memory budget, where only
  // whole replicas train and the rest wait as spares, outside the step.
  int64_t TrainedMembers(int64_t members) const;
  // PS pipelines keep a replica whole even when some of its members have
  // no samples of their own (the epoch's last step): the first this many
  // of `trained` members stay in the step without samples.
  int64_t MembersKeptWithoutSamples(int64_t trained) const;
  // Whether a member at `rank` with no samples of this step stays in it.
  bool KeepsMemberWithoutSamples(int64_t rank, int64_t kept) const {
    return ring_ || rank < kept;
  }

 private:
  bool sync_ = true;
  bool ssp_ = false;
  bool has_shards_ = true;
  bool ring_ = false;
  bool hybrid_ = false;
  bool pipeline_ = false;
  bool aborts_ = false;
  bool finalize_on_push_ = false;
  int64_t stages_ = 1;
  bool memory_budget_ = false;
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_STEP_RULES_H_

#include "coordinator/step_rules.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "proto/job_convert.h"

namespace ferry {

absl::StatusOr<StepRules> StepRules::For(const v1::JobSpec& job,
                                         bool finalize_on_push) {
  const bool ring = ModeHasRing(job.mode());
  const bool sync = job.consistency() == v1::CONSISTENCY_SYNC;
  const bool pipeline = job.pipeline_stages() > 1;
  if (ring && (!sync || job.sync_quorum() > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        ModeName(job.mode()),
        " mode is synchronous: it takes neither async/ssp consistency nor "
        "a sync quorum"));
  }
  if (pipeline && job.mode() == v1::MODE_HYBRID) {
    return absl::InvalidArgumentError(
        "--pipeline-stages needs --mode ring or ps: hybrid mode trains DLRMs, "
        "which are not layer stacks");
  }
  if (pipeline && !sync) {
    return absl::InvalidArgumentError(
        "--pipeline-stages in ps mode needs --consistency sync: a replica's "
        "stages train each step together");
  }
  if (pipeline && job.sync_quorum() > 0) {
    return absl::InvalidArgumentError(
        "--pipeline-stages cannot take --sync-quorum: a step closed without "
        "one stage's push would apply a replica's gradient for some layers "
        "and not for others");
  }
  StepRules r;
  r.sync_ = sync;
  r.ssp_ = job.consistency() == v1::CONSISTENCY_SSP;
  r.has_shards_ = ModeHasShards(job.mode());
  r.ring_ = ring;
  r.hybrid_ = job.mode() == v1::MODE_HYBRID;
  r.pipeline_ = pipeline;
  r.aborts_ = ring || pipeline || job.sum_on_arrival();
  r.finalize_on_push_ =
      r.has_shards_ && sync && job.sync_quorum() == 0 && finalize_on_push;
  r.stages_ = std::max<int64_t>(1, job.pipeline_stages());
  r.memory_budget_ = job.worker_memory_budget_bytes() > 0;
  return r;
}

int64_t StepRules::TrainedMembers(int64_t members) const {
  if (ring_ || !pipeline_ || !memory_budget_) return members;
  return members / stages_ * stages_;
}

int64_t StepRules::MembersKeptWithoutSamples(int64_t trained) const {
  return pushes_without_samples() ? trained / stages_ * stages_ : 0;
}

}  // namespace ferry

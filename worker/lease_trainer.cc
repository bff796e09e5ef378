#include "worker/lease_trainer.h"

#include <utility>

#include "common/status_macros.h"
#include "proto/job_convert.h"
#include "worker/ctr_lease_trainer.h"
#include "worker/local_pipeline_trainer.h"
#include "worker/pipeline_lease_trainer.h"
#include "worker/step_trainer.h"

namespace ferry {

absl::StatusOr<TrainerBuffers> TrainerBuffers::Allocate(ComputeBackend* backend,
                                                        int64_t n) {
  TrainerBuffers b;
  ASSIGN_OR_RETURN(b.params, backend->Allocate(n));
  ASSIGN_OR_RETURN(b.grads, backend->Allocate(n));
  b.view.num_elements = n;
  b.view.params = b.params.data();
  b.view.grads = b.grads.data();
  b.view.host_params = b.view.params;
  b.view.host_grads = b.view.grads;
  if (!backend->IsHostMemory()) {
    ASSIGN_OR_RETURN(b.host_params, backend->AllocateHost(n));
    ASSIGN_OR_RETURN(b.host_grads, backend->AllocateHost(n));
    b.view.host_params = b.host_params.data();
    b.view.host_grads = b.host_grads.data();
  }
  return b;
}

absl::StatusOr<std::unique_ptr<LeaseTrainer>> MakeLeaseTrainer(
    const v1::JobSpec& job, DeviceChoice device, int threads,
    PeerEndpoint* peer, absl::Duration receive_timeout) {
  if (job.pipeline_stages() > 1) {
    if (peer == nullptr) {
      return absl::InvalidArgumentError(
          "a pipeline job needs the worker's peer endpoint");
    }
    ASSIGN_OR_RETURN(std::unique_ptr<PipelineLeaseTrainer> trainer,
                     PipelineLeaseTrainer::Create(job, device, threads, peer,
                                                  receive_timeout));
    return std::unique_ptr<LeaseTrainer>(std::move(trainer));
  }
  if (IsDlrmJob(job)) {
    ASSIGN_OR_RETURN(std::unique_ptr<CtrLeaseTrainer> trainer,
                     CtrLeaseTrainer::Create(job, device, threads));
    return std::unique_ptr<LeaseTrainer>(std::move(trainer));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<StepTrainer> trainer,
                   StepTrainer::Create(job, device, threads));
  return std::unique_ptr<LeaseTrainer>(std::move(trainer));
}

absl::StatusOr<std::unique_ptr<LeaseTrainer>> MakeLocalLeaseTrainer(
    const v1::JobSpec& job, DeviceChoice device, int threads) {
  if (job.pipeline_stages() >= 1) {
    ASSIGN_OR_RETURN(std::unique_ptr<LocalPipelineTrainer> trainer,
                     LocalPipelineTrainer::Create(job, device, threads));
    return std::unique_ptr<LeaseTrainer>(std::move(trainer));
  }
  return MakeLeaseTrainer(job, device, threads);
}

}  // namespace ferry

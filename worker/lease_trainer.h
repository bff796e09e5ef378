// LeaseTrainer: the compute half of a distributed worker's step, as the
// training loop (worker/distributed_worker.cc) sees it: it owns the backend,
// the model, the job's training data and the flat dense parameter / gradient
// buffers, and trains one TRAIN lease through a GradientExchange. One per
// kind of model:
//   StepTrainer    (worker/step_trainer.h): layer-stack models (ModelDef);
//   CtrLeaseTrainer (worker/ctr_lease_trainer.h): DLRM CTR models, whose
//                   embedding rows come from and go to the exchange
//                   (its EmbeddingRowExchange capability,
//                   worker/exchange_capabilities.h).
// MakeLeaseTrainer picks it from the job.
//
// Thread safety: not thread-safe; the training loop's thread uses it
// (CancelIfOlder excepted).
#ifndef FERRY_WORKER_LEASE_TRAINER_H_
#define FERRY_WORKER_LEASE_TRAINER_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "compute/compute_backend.h"
#include "ferry/v1/coordinator.pb.h"
#include "model/parameter_layout.h"
#include "model/sequential_model.h"
#include "nlohmann/json.hpp"
#include "worker/gradient_exchange.h"
#include "worker/worker_deps.h"

namespace ferry {

// Seconds of `clock` since `since` (a trainer's timing of its phases).
inline double SecondsSince(Clock& clock, absl::Time since) {
  return absl::ToDoubleSeconds(clock.Now() - since);
}

// What one trained step produced.
struct StepResult {
  int64_t samples = 0;
  LossStats stats;
  double compute_seconds = 0.0;  // staging + forward/backward
  double comm_seconds = 0.0;     // BeginStep + FinishStep (not overlapped)
  // CTR models: distinct ids of the step's batch, summed over the tables.
  int64_t unique_ids = 0;
  // Pipeline jobs: this worker's part of the step (StepReport.pipeline).
  std::optional<v1::PipelineStepFigures> pipeline;
};

// A trainer's flat dense buffers of n floats: params and grads in the
// backend's memory, and host staging copies for a backend that is not host
// memory (`view` points at all four; host_* == params / grads otherwise).
struct TrainerBuffers {
  DeviceBuffer params, grads, host_params, host_grads;
  ExchangeBuffers view;

  // The backend's allocation errors.
  static absl::StatusOr<TrainerBuffers> Allocate(ComputeBackend* backend,
                                                 int64_t n);
};

class LeaseTrainer {
 public:
  virtual ~LeaseTrainer() = default;

  // Trains `lease` through `exchange` (generation: the membership
  // generation the worker knows, for a lease that names none).
  // Errors: INVALID_ARGUMENT for a lease without samples (unless the
  // exchange's policy allows it) or outside the dataset; the exchange's
  // and the backend's. On error the exchange's step may still be open: the
  // caller abandons it.
  virtual absl::StatusOr<StepResult> Train(const v1::NextTaskResponse& lease,
                                           int64_t generation,
                                           GradientExchange& exchange,
                                           Clock& clock) = 0;

  // Called by the loop once the report of the step Train last returned OK
  // for has gone out (sync: its send started; async: it is queued with the
  // next request). Whatever must follow the report without holding it up
  // (a host waiting for its step's weights, which a coordinator-finalized
  // step only has after the report) goes here. No-op by default.
  virtual void StepReported() {}

  // Any thread (the heartbeat's): the coordinator aborted the steps leased
  // under fences older than `fence`; a trainer that waits on other workers
  // itself (a pipeline stage on its neighbours) gives such a step up at
  // once. No-op by default.
  virtual void CancelIfOlder(int64_t fence) { (void)fence; }

  // Evaluations run by the worker (a job whose model is its workers':
  // coordinator/worker_evals.h). Whether this trainer runs them
  // (NextTaskRequest.evaluates); false by default.
  virtual bool evaluates() const { return false; }
  // An EVALUATE task: brings the weights of task.evaluate() (the job's
  // final ones) through `exchange` and has them evaluated; the result is
  // then TakeEvaluation()'s. UNIMPLEMENTED by default.
  virtual absl::Status Evaluate(const v1::NextTaskResponse& task,
                                GradientExchange& exchange) {
    (void)task;
    (void)exchange;
    return absl::UnimplementedError("this worker does not evaluate");
  }
  // The result of an evaluation this trainer ran (of a TRAIN lease's
  // EvalTask during Train, or of Evaluate), once; nullopt: none new.
  virtual std::optional<v1::WorkerEvaluation> TakeEvaluation() {
    return std::nullopt;
  }

  virtual ComputeBackend* backend() const = 0;
  // The job's flat buffer (proto/job_convert.h JobDenseLayout).
  virtual const ParameterLayout& layout() const = 0;
  // The buffers the exchange is made with (a PS pipeline trainer's: empty
  // before its first step, its current role's after; each step brings its
  // own, ExchangeStep.buffers).
  virtual const ExchangeBuffers& buffers() const = 0;
  virtual int64_t train_samples() const = 0;
  // Keys the worker's summary adds for this kind of trainer (pipeline
  // jobs: "pipeline", the steps it ran per role and its stage figures);
  // null: none.
  virtual nlohmann::json SummaryJson() const { return nullptr; }
};

// CtrLeaseTrainer for a DLRM job (IsDlrmJob), PipelineLeaseTrainer for a
// pipeline job (pipeline_stages > 1: its stage links come from `peer`, not
// owned, and wait up to `receive_timeout`), StepTrainer otherwise; their
// Create errors.
absl::StatusOr<std::unique_ptr<LeaseTrainer>> MakeLeaseTrainer(
    const v1::JobSpec& job, DeviceChoice device, int threads,
    PeerEndpoint* peer = nullptr,
    absl::Duration receive_timeout = absl::Seconds(30));

// The trainer of a standalone run of `job` (worker/standalone_loop.h): every
// pipeline stage in this process for a job with pipeline_stages >= 1
// (worker/local_pipeline_trainer.h), else MakeLeaseTrainer's. Their Create
// errors.
absl::StatusOr<std::unique_ptr<LeaseTrainer>> MakeLocalLeaseTrainer(
    const v1::JobSpec& job, DeviceChoice device, int threads);

}  // namespace ferry

#endif  // FERRY_WORKER_LEASE_TRAINER_H_

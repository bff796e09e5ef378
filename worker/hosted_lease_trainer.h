// HostedLeaseTrainer: the LeaseTrainer of a worker whose gradients are
// computed by its host program's own code (a PyTorch script through the
// Python bindings, python/ferry_module.cc), not by ferry's layer library.
//
// Train hands each lease to the host through a HostStepChannel (see there
// for the handoff) and turns what the host declares into the exchange's
// calls, on the training loop's thread:
//   - BeginStep once the host asks for a lease (the weights are written
//     while the host waits), then the lease's sample indices to the host;
//   - each range the host declares final: its gradient, which the host's
//     code computed as the MEAN over the lease's samples (a loss averaged
//     over the batch, as torch's losses are by default), is scaled by the
//     sample count to the SUM the exchanges take, then Ready;
//   - the host's Finish: FinishStep, and the verdict (applied or given up)
//     back to the host.
// A range holding NaN or an infinity (or outside the model) refuses the
// step: nothing more of it reaches the exchange, the step is abandoned, the
// host's Finish gets INVALID_ARGUMENT naming the tensor, and the worker
// ends with it (it leaves the job; the other workers go on).
// A ring lease without samples (the member contributes zeros) is trained
// here without the host. An EVALUATE task (Evaluate) goes to the host as a
// lease without samples, with the weights to evaluate.
//
// The buffers (HostedBuffers) are shared with the host, which keeps them as
// its model's parameter and gradient storage, so they outlive the trainer.
// The weights the host sees (`params`) are written only while it waits: a
// PS pull, started ahead while the host still computes, lands in `staging`
// (ExchangeBuffers' host_params / params split) and is copied over before
// the host's Finish returns (which waits for the step's report to go out,
// StepReported) when the exchange can bring the step's weights then
// (StepWeightsExchange), else at the next BeginStep. Ring members apply the
// step to `params` in FinishStep.
//
// Thread safety: as LeaseTrainer; the host uses the channel.
#ifndef FERRY_WORKER_HOSTED_LEASE_TRAINER_H_
#define FERRY_WORKER_HOSTED_LEASE_TRAINER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/host_step_channel.h"
#include "worker/lease_samples.h"
#include "worker/lease_trainer.h"

namespace ferry {

// The flat buffers of a hosted worker: the weights its host computes with,
// the staging copy PS pulls land in (PS jobs only; empty otherwise), and
// the gradients the host writes.
struct HostedBuffers {
  std::unique_ptr<ComputeBackend> backend;  // CPU: the exchanges' math
  ParameterLayout layout;
  // The parameters [0, trainable_end) of the flat buffer; the state after
  // them (JobStateElements) is never absent.
  int64_t trainable_end = 0;
  // Whether steps may leave parameters out (JobSpec.model_from_worker: the
  // ring agrees on absent ranges only then, and PS must train alike).
  bool absent_allowed = false;
  std::vector<float> params, staging, grads;
  ExchangeBuffers view;

  // The job's layout (JobDenseLayout), a CPU backend, zeroed buffers; ring
  // jobs start from the job's initial values (JobDenseInitialValues; for a
  // job whose model is a worker's, the coordinator at `coordinator` serves
  // them), as every member must. Errors: the layout's, the initial values'.
  static absl::StatusOr<std::shared_ptr<HostedBuffers>> ForJob(
      const v1::JobSpec& job, const std::string& coordinator);
};

class HostedLeaseTrainer final : public LeaseTrainer {
 public:
  // `channel` (not owned) must outlive the trainer. The leases index into
  // the host's training set, whose size comes with each NextLease.
  HostedLeaseTrainer(const v1::JobSpec& job,
                     std::shared_ptr<HostedBuffers> buffers,
                     HostStepChannel* channel);

  // Errors: CANCELLED when the host left; INVALID_ARGUMENT for a lease
  // outside the host's training set; the exchange's.
  absl::StatusOr<StepResult> Train(const v1::NextTaskResponse& lease,
                                   int64_t generation,
                                   GradientExchange& exchange,
                                   Clock& clock) override;

  // Answers the host's Finish of the step Train last returned OK for, once
  // its report is out: with the step's weights when the exchange can bring
  // them now (StepWeightsExchange). Waiting for them before the report
  // would deadlock a step the coordinator finalizes (a contributor left):
  // it is applied only after the report.
  void StepReported() override;

  // The host evaluates when it said so (HostStepChannel::SetEvaluates).
  bool evaluates() const override { return channel_->evaluates(); }
  // The job's current weights, which are those of the task's version (the
  // coordinator holds the steps), in the host's parameters (PS: pulled
  // from the shards; ring: the member's own, already there), then an
  // evaluation-only lease to the host and its result. Errors: the pull's;
  // CANCELLED when the host left; FAILED_PRECONDITION when it did not evaluate.
  absl::Status Evaluate(const v1::NextTaskResponse& task,
                        GradientExchange& exchange) override;
  std::optional<v1::WorkerEvaluation> TakeEvaluation() override;

  ComputeBackend* backend() const override { return buffers_->backend.get(); }
  const ParameterLayout& layout() const override { return buffers_->layout; }
  const ExchangeBuffers& buffers() const override { return buffers_->view; }
  // The host's training set as of its last NextLease (0 before).
  int64_t train_samples() const override { return train_samples_; }

 private:
  // The host's events of the open step into the exchange, up to its
  // Finish; then FinishStep. The first failure is kept, the host's events
  // are still taken up to its Finish, and the host is told the step was
  // not applied.
  absl::Status RunHostStep(GradientExchange& exchange, int64_t samples,
                           Clock& clock, StepResult& result);
  // INVALID_ARGUMENT naming the tensor element `index` of the flat buffer,
  // whose gradient `value` is NaN or infinite.
  absl::Status NotFinite(int64_t index, float value) const;
  // The weights a pull left in staging, copied to the host's parameters
  // (the host is waiting); nothing when the two are one buffer.
  void ShowStagedWeights();
  // Trains a lease without samples: zeros for the whole buffer, its
  // parameters absent where the job and the exchange take that.
  absl::Status ContributeZeros(GradientExchange& exchange);
  // INVALID_ARGUMENT when a range the host declared absent holds a
  // non-zero gradient or reaches the model's state, or the job's model is
  // not its workers' (HostedBuffers::absent_allowed).
  absl::Status CheckAbsent(const HostEvent& event) const;

  std::shared_ptr<HostedBuffers> buffers_;
  const uint64_t seed_;
  HostStepChannel* const channel_;
  int64_t train_samples_ = 0;
  std::optional<LeaseSamples> samples_;  // of train_samples_
  // The exchange of a step whose host still waits in Finish for
  // StepReported (null: none).
  GradientExchange* unanswered_ = nullptr;
  // An evaluation the host ran, not yet taken.
  std::optional<HostEvaluation> evaluation_;
};

}  // namespace ferry

#endif  // FERRY_WORKER_HOSTED_LEASE_TRAINER_H_

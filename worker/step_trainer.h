// The LeaseTrainer (worker/lease_trainer.h) of layer-stack models: owns the
// backend, the model, the job's dataset and the flat parameter / gradient
// buffers, and trains one TRAIN lease through a GradientExchange:
//
//   stage the lease's samples -> exchange.BeginStep (weights into params)
//   -> forward + backward, each layer's final gradient range handed to
//   exchange.Ready as soon as the backward pass has produced it (copied to
//   host_grads first on a device backend) -> exchange.FinishStep.
//
// It knows nothing of the mode: the exchange decides what BeginStep and
// FinishStep do. A lease without samples (allowed by the exchange's policy)
// contributes an all-zero gradient.
//
// BatchNorm state rides with the gradient: the buffers' last
// state_elements() hold the running statistics. A step trains from the
// exchanged state and declares, as that range's "gradient", its change
// times the step's samples; the exchange's mean over the step's samples is
// then the contributors' sample-weighted mean change, which the optimizer
// adds (compute/optimizer.h). Every replica so ends each step with the same
// state (docs/models.md, "BatchNorm in distributed jobs").
//
// Thread safety: not thread-safe; the training loop's thread uses it.
#ifndef FERRY_WORKER_STEP_TRAINER_H_
#define FERRY_WORKER_STEP_TRAINER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "compute/compute_backend.h"
#include "data/batch_stager.h"
#include "data/data_source.h"
#include "ferry/v1/coordinator.pb.h"
#include "model/sequential_model.h"
#include "worker/gradient_exchange.h"
#include "worker/lease_samples.h"
#include "worker/lease_trainer.h"

namespace ferry {

class StepTrainer final : public LeaseTrainer {
 public:
  // Builds the backend (`device`, `threads`), the job's model (checked
  // against the job's tensors), loads its dataset and allocates the
  // buffers; params start at the model's initial parameters from the job's
  // seed. Errors: INVALID_ARGUMENT / FAILED_PRECONDITION for a model or
  // dataset that does not fit the job; the backend's and the reader's.
  static absl::StatusOr<std::unique_ptr<StepTrainer>> Create(
      const v1::JobSpec& job, DeviceChoice device, int threads);

  // Trains `lease` through `exchange` (generation: the membership
  // generation the worker knows, for a lease that names none).
  // Errors: INVALID_ARGUMENT for a lease without samples (unless the
  // exchange's policy allows it) or outside the dataset; the exchange's
  // and the backend's. On error the exchange's step may still be open: the
  // caller abandons it.
  absl::StatusOr<StepResult> Train(const v1::NextTaskResponse& lease,
                                   int64_t generation,
                                   GradientExchange& exchange,
                                   Clock& clock) override;

  ComputeBackend* backend() const override { return backend_.get(); }
  // The job's flat buffer (model/model_params.h ModelJobLayout): the
  // model's parameters, then its last state_elements() of BatchNorm state.
  const ParameterLayout& layout() const override { return job_layout_; }
  int64_t state_elements() const {
    return job_layout_.total_elements() - model_->layout().total_elements();
  }
  const ExchangeBuffers& buffers() const override { return buffers_.view; }
  int64_t train_samples() const override { return data_.train.num_samples; }

 private:
  StepTrainer() = default;

  // Before a batch: the model's state buffer := the exchanged state (the
  // buffers' tail), remembered on the host.
  absl::Status LoadState();
  // After it: host_grads' tail := (state now - state before) * batch,
  // declared to `exchange`.
  absl::Status DeclareStateChange(int batch, GradientExchange& exchange);

  int global_batch_ = 0;
  std::unique_ptr<ComputeBackend> backend_;
  std::optional<SequentialModel> model_;
  ParameterLayout job_layout_;
  std::vector<float> state_before_;  // host, state_elements() floats
  uint64_t seed_ = 0;
  TrainTestData data_;
  TrainerBuffers buffers_;
  std::optional<BatchStager> stager_;
  int stager_max_ = 0;
  std::optional<LeaseSamples> lease_samples_;
};

}  // namespace ferry

#endif  // FERRY_WORKER_STEP_TRAINER_H_

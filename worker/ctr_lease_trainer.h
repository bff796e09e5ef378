// The LeaseTrainer (worker/lease_trainer.h) of DLRM CTR jobs: the job's
// training split of `criteo:DIR`, one CtrStep (model/ctr_step.h) and the
// flat dense buffers. One lease:
//
//   gather the lease's samples (CtrDataset::GatherBatch) ->
//   exchange.BeginStep (dense weights into params) -> CtrStep reads the
//   batch's unique rows from the exchange's EmbeddingRowExchange
//   (worker/exchange_capabilities.h) embedding_rows() and runs forward +
//   backward -> exchange.Ready(whole dense buffer) and
//   ReadyRows(row gradient sums) -> exchange.FinishStep.
// Train refuses (INVALID_ARGUMENT) an exchange without EmbeddingRowExchange.
//
// The dense gradient is declared in one range after the backward pass (a
// DLRM's dense part is small: 0.48M parameters for the preset; its
// embedding rows are what moves).
//
// Thread safety: not thread-safe; the training loop's thread uses it.
#ifndef FERRY_WORKER_CTR_LEASE_TRAINER_H_
#define FERRY_WORKER_CTR_LEASE_TRAINER_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "data/ctr_dataset.h"
#include "model/ctr_step.h"
#include "worker/lease_samples.h"
#include "worker/lease_trainer.h"

namespace ferry {

class CtrLeaseTrainer final : public LeaseTrainer {
 public:
  // Builds the backend, the job's DLRM (JobDlrmSpec, checked against the
  // job's tensors), loads the training split of job.dataset (criteo:DIR)
  // and allocates the buffers. Errors: INVALID_ARGUMENT for a job that is
  // not a DLRM, a dataset other than criteo:DIR or a spec that does not fit
  // Criteo's 13 dense / 26 categorical features; FAILED_PRECONDITION for
  // tensors that differ from the spec's; the reader's and the backend's.
  static absl::StatusOr<std::unique_ptr<CtrLeaseTrainer>> Create(
      const v1::JobSpec& job, DeviceChoice device, int threads);

  // LeaseTrainer. A lease without samples (the ring's members at an epoch's
  // end, hybrid mode) contributes a zero dense gradient and no rows.
  // Train's errors also: INVALID_ARGUMENT (not retried: the worker stops)
  // when the exchange has no embedding rows (a mode without tables) or
  // refuses empty leases; CtrStep's.
  absl::StatusOr<StepResult> Train(const v1::NextTaskResponse& lease,
                                   int64_t generation,
                                   GradientExchange& exchange,
                                   Clock& clock) override;
  ComputeBackend* backend() const override { return backend_.get(); }
  const ParameterLayout& layout() const override { return layout_; }
  const ExchangeBuffers& buffers() const override { return buffers_.view; }
  int64_t train_samples() const override { return train_.num_samples(); }

 private:
  CtrLeaseTrainer() = default;
  // A lease without samples: zeros through the exchange.
  absl::StatusOr<StepResult> TrainEmpty(const v1::NextTaskResponse& lease,
                                        int64_t generation,
                                        GradientExchange& exchange,
                                        EmbeddingRowExchange& tables,
                                        Clock& clock);

  std::unique_ptr<ComputeBackend> backend_;
  std::optional<CtrStep> step_;
  ParameterLayout layout_;
  CtrDataset train_;
  std::optional<LeaseSamples> lease_samples_;
  CtrBatch batch_;
  TrainerBuffers buffers_;
};

}  // namespace ferry

#endif  // FERRY_WORKER_CTR_LEASE_TRAINER_H_

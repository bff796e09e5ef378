// The LeaseTrainer of a pipeline job (JobSpec.pipeline_stages = P > 1, ring
// or sync PS mode; docs/pipeline.md). Each step, the step's members in rank
// order (the lease's `ring`, filled for PS pipeline leases too) form
// replicas of P consecutive ranks: rank r is stage r % P of replica r / P,
// and the members after the last whole replica train the whole model alone.
// A replica trains its members' samples together (their tasks come with
// the lease's ring): its first stage stages the inputs, its last the
// labels, and activations and their gradients travel between neighbouring
// members over RingStageLink (two RingTransports per generation from the
// worker's PeerEndpoint, forward in stage order and backward in reverse).
//
// A stage computes the gradient of its own layers, and the mode's exchange
// (the ring's all-reduce, or the PS's push and the shards' sum) adds every
// replica's stages into the step's gradient. Weights, checkpoints,
// evaluation, joiners and rollbacks are therefore the mode's.
//  - PS mode: a member's buffers hold only its role's layers (its stage's
//    flat range and, with BatchNorm, its state's; the whole model when it
//    trains alone), reallocated when its role changes. It pulls only those
//    ranges into them (ExchangeStep.pull_ranges and .buffers), pushes its
//    gradient and declares the rest zeros (the PS exchange's
//    PartialBufferExchange::ReadyZeros: flags without bytes). Its memory
//    is its stage's, which is what --worker-memory-budget bounds.
//  - Ring mode: every member holds the whole flat buffer (zeros outside its
//    stage's gradient). With more members than stages each stage
//    all-reduces only its layers in its own ring (StageRingsOf;
//    worker/ring_exchange.h keeps track of which stages a member holds
//    current); with at most P members the whole buffer is all-reduced over
//    the whole ring.
// BatchNorm's running statistics are the model's state (the flat buffer's
// suffix): a stage loads its layers' state from the step's weights and
// declares its change times the replica's samples as that range's
// gradient, so each step moves the state by the replicas' mean change. In
// ring mode with stage rings the whole state is all-reduced in one more
// ring of every member.
//
// Thread safety: not thread-safe; the training loop's thread uses it, except
// CancelIfOlder (any thread).
#ifndef FERRY_WORKER_PIPELINE_LEASE_TRAINER_H_
#define FERRY_WORKER_PIPELINE_LEASE_TRAINER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "data/batch_stager.h"
#include "data/data_source.h"
#include "model/pipeline_split.h"
#include "model/pipeline_stage.h"
#include "pipeline/pipeline_options.h"
#include "pipeline/pipeline_schedule.h"
#include "pipeline/ring_pipeline_roles.h"
#include "pipeline/ring_stage_link.h"
#include "pipeline/stage_runner.h"
#include "worker/lease_samples.h"
#include "worker/lease_trainer.h"
#include "worker/worker_deps.h"

namespace ferry {

// The stage rings rank `rank` of a ring of `size` all-reduces in, for a job
// of `stages` stages (ExchangeStep.stage_rings): with more members than
// stages (every stage then held by at least two members), a stage member
// is in its stage's ring and a member training alone in every stage's, each
// ring holding that stage's members and the members training alone, in rank
// order. Empty otherwise (the whole buffer over the whole ring: with a
// single replica each stage's only copy would be lost with its member).
// `state_ring` (a model with BatchNorm): with stage rings, every member is
// also in ring `stages`, of all members, over the model's state (the
// stages' running statistics: small, and held by every member). Pure.
std::vector<ExchangeStep::StageRing> StageRingsOf(int rank, int size,
                                                  int stages,
                                                  bool state_ring = false);

// PipelineRoleOf and StageHoldersOf: pipeline/ring_pipeline_roles.h.

// The flat parameter range of each stage of `split` (model order).
std::vector<FlatRange> StageParamRanges(const ModelDef& def,
                                        const ParameterLayout& layout,
                                        const std::vector<StageRange>& split);

class PipelineLeaseTrainer final : public LeaseTrainer {
 public:
  // `peer` (not owned, must outlive the trainer) opens the stage links;
  // every receive waits up to `receive_timeout`. Errors: StepTrainer's, and
  // INVALID_ARGUMENT for a job whose pipeline fields the model cannot take.
  static absl::StatusOr<std::unique_ptr<PipelineLeaseTrainer>> Create(
      const v1::JobSpec& job, DeviceChoice device, int threads,
      PeerEndpoint* peer, absl::Duration receive_timeout);

  absl::StatusOr<StepResult> Train(const v1::NextTaskResponse& lease,
                                   int64_t generation,
                                   GradientExchange& exchange,
                                   Clock& clock) override;

  // Aborts the open step's stage links when it was leased under an older
  // fence: a stage waiting on a lost neighbour fails at once instead of
  // after the receive timeout. The next step opens new links.
  void CancelIfOlder(int64_t fence) override;

  ComputeBackend* backend() const override { return backend_.get(); }
  const ParameterLayout& layout() const override { return layout_; }
  const ExchangeBuffers& buffers() const override { return buffers_.view; }
  int64_t train_samples() const override { return data_.train.num_samples; }
  // {"pipeline": figures}: over the steps the worker trained, per role
  // ("stage 1 of 2", "alone") the steps; busy and waiting seconds, their
  // idle share, peak activation bytes, the peak bytes of its parameter and
  // gradient buffers and bytes to and from its neighbours.
  nlohmann::json SummaryJson() const override;

 private:
  PipelineLeaseTrainer() = default;

  // The stage for `role` (kept while the role lasts: only the current
  // role's stage is held).
  absl::StatusOr<PipelineStage*> StageFor(const PipelineRole& role);
  // The replica's links for `lease`'s ring generation (opened once per
  // generation and replica).
  absl::StatusOr<StageLink*> LinkFor(const v1::NextTaskResponse& lease,
                                     const PipelineRole& role);
  // The flat ranges `role` computes with, ascending: a stage's parameters
  // and (with BatchNorm) its state, in the buffer's state suffix; empty
  // for a member alone (the whole model).
  std::vector<FlatRange> RoleRanges(const PipelineRole& role,
                                    const PipelineStage& stage) const;
  // Where `stage`'s state is in the job's flat buffer.
  FlatRange StateRange(const PipelineStage& stage) const;
  // Makes buffers_ hold `ranges` (empty: the whole model) back to back (PS
  // mode; a no-op when they do, and in ring mode). The exchange's step is
  // abandoned first: a pull started ahead writes into the old buffers.
  absl::Status HoldRanges(const std::vector<FlatRange>& ranges,
                          GradientExchange& exchange);
  // BatchNorm: the stage's state from the step's weights (kept to compute
  // its change), and the change times the replica's samples into
  // host_grads, after the backward pass (docs/models.md, "BatchNorm in
  // distributed jobs"). No-ops for a stage without state.
  absl::Status LoadStageState(PipelineStage& stage);
  absl::Status WriteStateChange(PipelineStage& stage, int batch);
  // Declares the step's gradient: the held ranges, zeros for the rest.
  absl::Status DeclareGradient(GradientExchange& exchange);
  // Adds a step's figures to the totals; the step's report part.
  v1::PipelineStepFigures RecordFigures(const PipelineRole& role,
                                        const StageStepResult& r);
  // Bytes of buffers of `elements` floats (params and grads, and their host
  // copies on a device).
  int64_t BufferBytes(int64_t elements) const;
  // The replica's samples: its members' tasks in rank order.
  absl::StatusOr<std::vector<int64_t>> ReplicaIndices(
      const v1::NextTaskResponse& lease, const PipelineRole& role,
      int64_t* first_position);

  v1::JobSpec job_;
  ModelDef def_;
  std::vector<int> split_starts_;
  // Of the job's P stages' parameters, then (with BatchNorm) the model's
  // state: ExchangeStep.stage_ranges.
  std::vector<FlatRange> stage_ranges_;
  int64_t param_elements_ = 0;       // the layout's trainable prefix
  std::vector<float> state_before_;  // the stage's state as the step began
  StageBalance balance_ = StageBalance::kCompute;
  PipelineSchedule schedule_ = PipelineSchedule::k1F1B;
  PeerEndpoint* peer_ = nullptr;
  absl::Duration receive_timeout_;
  std::unique_ptr<ComputeBackend> backend_;
  std::unique_ptr<ComputeBackend> host_;  // stages the batches
  ParameterLayout layout_;
  TrainTestData data_;
  // PS mode: buffers_ hold only the member's role's ranges (their
  // segments); holding_: they hold the ranges the last step asked for.
  bool stage_resident_ = false;
  bool holding_ = false;
  TrainerBuffers buffers_;
  int64_t peak_buffer_bytes_ = 0;  // of buffers_, over the job
  std::optional<BatchStager> stager_;
  int stager_max_ = 0;
  std::optional<LeaseSamples> lease_samples_;
  // The current role's stage (its stage and stage count: stage_role_).
  std::optional<PipelineStage> stage_;
  PipelineRole stage_role_;
  // The open generation's links. The transports are replaced and aborted
  // under cancel_mu_.
  int64_t links_generation_ = -1;
  PipelineRole links_role_;
  absl::Mutex cancel_mu_;
  std::unique_ptr<RingTransport> forward_ ABSL_GUARDED_BY(cancel_mu_);
  std::unique_ptr<RingTransport> backward_ ABSL_GUARDED_BY(cancel_mu_);
  int64_t step_fence_ ABSL_GUARDED_BY(cancel_mu_) = -1;
  bool links_aborted_ ABSL_GUARDED_BY(cancel_mu_) = false;
  std::unique_ptr<RingStageLink> link_;
  // Summed over the steps trained.
  std::map<std::string, int64_t> steps_by_role_;
  double busy_seconds_ = 0.0;
  double wait_seconds_ = 0.0;
  double stage_seconds_ = 0.0;
  int64_t peak_activation_bytes_ = 0;
  int64_t neighbour_bytes_sent_ = 0;
  int64_t neighbour_bytes_received_ = 0;
};

}  // namespace ferry

#endif  // FERRY_WORKER_PIPELINE_LEASE_TRAINER_H_

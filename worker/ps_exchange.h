// The PS mode's GradientExchange (worker/gradient_exchange.h) over a
// ParameterClient (ps/ps_client.h: gRPC in ferry-worker, a fake in tests):
// BeginStep pulls the weights of version >= lease.pull_version into
// host_params (copied to the backend when it is not host memory) and opens
// a push session tagged with the step, generation, sample count and the
// pulled version; Ready pushes host_grads' range; FinishStep waits for
// every shard. A step with pull_ranges (a pipeline stage) pulls only the
// chunks in them, one pull each; the rest of host_params keeps whatever it
// held. A step with its own buffers (ExchangeStep.buffers: a PS pipeline
// stage's, which hold only its parameters and state) pulls its ranges into
// them and declares the rest of its gradient with ReadyZeros. Only the first
// range is pulled ahead.
//
// Pull ahead (sync leases that name the step's contributors, i.e. shards
// that finalize on push): BeginStep also starts the pull of the version
// this step makes (step + 1) into host_params, so each shard's new weights
// arrive as soon as that shard applied the step, overlapping the pushes to
// the other shards and the next lease's round trip. It is safe because a
// shard can only make step + 1 after this worker's push to it, i.e. after
// the backward pass declared (and so stopped reading) every range it owns.
// The next BeginStep uses it when its lease pulls exactly that version and
// it succeeded; otherwise it is cancelled (waited for) and a normal pull
// runs. AwaitStepWeights (StepWeightsExchange) waits for it right after
// FinishStep, for a trainer whose host must see the step's weights before
// it goes on (worker/hosted_lease_trainer.h).
//
// Jobs with embedding tables: the step's rows are read with one PullRows of
// the version BeginStep pulled (so rows and dense weights are of one version
// in a sync step) and pushed in the same push session as the dense gradient
// (PushInfo.with_rows), so a shard applies both or neither.
//
// Thread safety: as GradientExchange (CancelIfOlder is a no-op: PS steps
// are fenced by the shards' generation checks, not by the heartbeat).
#ifndef FERRY_WORKER_PS_EXCHANGE_H_
#define FERRY_WORKER_PS_EXCHANGE_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "compute/compute_backend.h"
#include "ps/ps_client.h"
#include "worker/gradient_exchange.h"

namespace ferry {

// The policy of a pipeline job's PS steps: a member without samples of its
// own trains its stage of its replica's samples; a stage that fails (a
// neighbour lost or late) reports it, so that the coordinator re-forms the
// step for every replica under a new fence (and rolls the shards' open
// step back, dropping the pushes the others made), and waits for the
// eviction.
ExchangePolicy PipelinePsPolicy();

class PsExchange final : public GradientExchange,
                         public PartialBufferExchange,
                         public EmbeddingRowExchange,
                         public StepWeightsExchange,
                         public AbsentGradientExchange {
 public:
  // `backend` and the buffers are not owned and outlive the exchange.
  // `shard_check_timeout` is the deadline of the ShardInfo calls that tell
  // a wait for other workers from a failure (WaitedForOthers).
  // `embedding_tables`: the job has embedding tables on the shards (a DLRM):
  // the exchange has EmbeddingRowExchange (lacks it otherwise), every push
  // carries the step's rows (ReadyRows), and embedding_rows() reads from
  // the shards.
  // `policy`: the default's, except for pipeline jobs
  // (PipelinePsPolicy()).
  PsExchange(std::unique_ptr<ParameterClient> client, ComputeBackend* backend,
             ExchangeBuffers buffers, absl::Duration shard_check_timeout,
             bool embedding_tables = false,
             ExchangePolicy policy = ExchangePolicy{});

  std::string mode() const override { return "ps"; }
  ExchangePolicy policy() const override { return policy_; }
  absl::Status BeginStep(const ExchangeStep& step) override;
  absl::Status Ready(int64_t offset, int64_t length) override;
  // PartialBufferExchange.
  absl::Status ReadyZeros(int64_t offset, int64_t length) override;
  // AbsentGradientExchange: the push says so (PushSession::ReadyAbsent).
  absl::Status ReadyAbsent(int64_t offset, int64_t length) override;
  absl::Status FinishStep() override;
  void AbandonStep() override {
    push_.reset();
    ahead_.reset();
    ahead_done_.reset();
  }
  // StepWeightsExchange.
  bool AwaitStepWeights() override;
  void CancelIfOlder(int64_t) override {}
  bool WaitedForOthers(const absl::Status& failure) override;
  // EmbeddingRowExchange (with embedding tables).
  EmbeddingRowSource* embedding_rows() override;
  absl::Status ReadyRows(const std::vector<SparseRows>& rows) override;
  void BetweenSteps() override {}
  absl::Status AddToReport(v1::StepReport& report) override;
  absl::StatusOr<std::vector<float>> FinalWeights() override;
  ExchangeBytes bytes() const override { return {client_->bytes(), {}}; }

 protected:
  // PartialBufferExchange, StepWeightsExchange; EmbeddingRowExchange with
  // embedding tables.
  ExchangeCapability* FindCapability(std::string_view name) override;

 private:
  const std::unique_ptr<ParameterClient> client_;
  ComputeBackend* const backend_;
  const ExchangeBuffers buffers_;
  const absl::Duration shard_check_timeout_;
  const bool embedding_tables_;
  const ExchangePolicy policy_;
  // Reads rows at the version the open step pulled.
  ParameterClientRowSource row_source_;
  // The weights of version >= `min_version` (the chunks in `range`) into
  // `into` (which holds the range): from the pull started ahead when it
  // asked for exactly that version and range into the same place, else
  // pulled now.
  absl::StatusOr<int64_t> PullVersion(int64_t min_version, FlatRange range,
                                      float* into);

  // The open (or last) step's buffers: buffers_ or the step's own.
  ExchangeBuffers step_buffers_;
  std::unique_ptr<PushSession> push_;   // the open step's
  std::unique_ptr<PendingPull> ahead_;  // pull of ahead_version_, if any
  // The pull ahead's result once AwaitStepWeights waited for it (ahead_ is
  // then null); the next PullVersion of the same version uses it.
  std::optional<absl::StatusOr<int64_t>> ahead_done_;
  int64_t ahead_version_ = -1;
  FlatRange ahead_range_;
  float* ahead_into_ = nullptr;
};

}  // namespace ferry

#endif  // FERRY_WORKER_PS_EXCHANGE_H_

// The ring mode's GradientExchange (worker/gradient_exchange.h): keeps one
// ring session (links, collective, bucket reducer) per ring generation,
// broadcasts rank 0's state (weights, optimizer state and step count) into
// a new ring, all-reduces gradient buckets while the backward pass runs,
// then divides by the step's sample count and applies the optimizer locally
// (the same common/ code a PS shard runs).
//
// Links come from a RingTransportFactory: GrpcRingTransport over the
// worker's RingPeer service in ferry-worker, an InMemoryRingHub's
// transports in tests (many ranks in one process).
//
// Rollback: before applying a step the state is copied
// (worker/ring_state_copies.h: rollback copies of up to three steps, plus,
// for the two newest leases with keep_state, hybrid mode's checkpoint
// versions). A new ring generation starts from the state after exactly
// `lease.step()` steps: a member that applied steps the coordinator then
// aborted (or that a shard rollback undid) goes back to its copy first, so
// rank 0 always broadcasts the committed state. The coordinator's committed
// steps (leases' and heartbeats' committed_steps: applied and saved, never
// re-formed) free the copies of the states before them (not in hybrid jobs:
// options.committed_steps_final).
//
// Ring checkpoints: a lease with `checkpoint` makes every member write its
// 1/w part of the state after the step (a ring pipeline's member: its share
// of the stages it holds current, ExchangeStep.stage_holders) in
// AddToReport, after FinishStep, reported as StepReport.checkpoint_written
// (or checkpoint_error). A lease with `restore_checkpoint` (a ring none of
// whose members holds the job's state) makes rank 0 load that checkpoint
// before its broadcast (a pipeline's gather of the stages); when it
// cannot, the step fails (ABORTED) and its failed report says why
// (StepReport.restore_error).
//
// Error feedback (lossy compression with feedback) is an ErrorFeedback
// (common/gradient_codec.h) whose residual outlives ring generations; a
// DLRM's tables are a RingTables (worker/ring_tables.h).
//
// Ring pipelines (ExchangeStep.stage_ranges and stage_rings): a stage member
// all-reduces only its stage's range, in that stage's ring (the stage's
// members of every replica and the members training alone), and applies
// the optimizer to that range only; the rest of its buffer goes stale. It
// knows which stages it holds current. A new ring generation (or the end of
// the job) gathers every stage's range, with its optimizer state, from the
// lowest rank that holds it current after the step the ring starts from;
// the weights digest is one per current range (StepReport.range_digests);
// what is published for the evaluation is the current ranges only, which
// the coordinator assembles from several members.
//
// Sharded optimizer state (options.shard_optimizer_state): a member's
// rollback copies hold its slice of the params and optimizer state. A new
// ring generation starts from the state after lease.step() steps: the
// members that hold a slice of it (those of the newest generation that
// applied exactly that many steps, after going back to a copy) all-gather
// the params from their slices and broadcast their optimizer state slice
// by slice, each member keeping its new slice's part; when some slice is
// held by no member the join fails (ABORTED: the coordinator takes such a
// ring back to a ring checkpoint, which every member then loads its slice
// of). At step 0 rank 0's params are broadcast and the state starts at
// zero.
//
// Thread safety: one thread (the worker's training loop) uses it, except
// CancelIfOlder() and ObserveCommitted(), which any thread may call.
#ifndef FERRY_WORKER_RING_EXCHANGE_H_
#define FERRY_WORKER_RING_EXCHANGE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/file_system.h"
#include "common/ring_defaults.h"
#include "compute/compute_backend.h"
#include "compute/optimizer.h"
#include "ferry/v1/coordinator.pb.h"
#include "ring/bucket_plan.h"
#include "ring/bucket_reducer.h"
#include "ring/ring_collective.h"
#include "ring/ring_transport.h"
#include "ring/weights_publisher.h"
#include "worker/gradient_exchange.h"
#include "worker/ring_state_copies.h"
#include "worker/ring_tables.h"

namespace ferry {

// Opens this worker's links of the ring a lease names (its
// ring_generation, rank and members in rank order); called once per ring
// generation, the previous generation's transport destroyed first.
// Errors: INVALID_ARGUMENT for a ring it cannot connect (e.g. an empty
// address); others as the transport's.
using RingTransportFactory =
    std::function<absl::StatusOr<std::unique_ptr<RingTransport>>(
        const v1::NextTaskResponse& lease)>;

struct RingExchangeOptions {
  std::string job_id;
  std::string worker_id;
  ComputeBackend* backend = nullptr;  // not owned
  RingTransportFactory connect;       // required
  // Not owned; may be null. Where the weights go when a reader (the
  // coordinator's evaluation) asks for them (BetweenSteps).
  WeightsPublisher* publisher = nullptr;
  // Not owned; may be null (bytes() then reports zeros). The bytes the
  // transports count for peer traffic.
  const ByteCounter* counter = nullptr;
  // A weights digest goes into the report of every digest_every-th applied
  // step (0: never).
  int64_t digest_every = 0;
  // Whether the coordinator's committed steps are final for this ring, so
  // that copies of the states before them may go (ObserveCommitted). Not
  // in hybrid jobs: a shard restored to a checkpoint takes the job back
  // below them (their rings restart from the keep_state copies).
  bool committed_steps_final = true;
  std::vector<int64_t> tensor_sizes;  // model order
  // The last state_elements of the buffers are non-trainable state
  // (model/model_params.h ModelJobLayout): all-reduced like gradients, then
  // added instead of going through the optimizer.
  int64_t state_elements = 0;
  int64_t bucket_elements = 0;
  OptimizerConfig optimizer;
  // Buffers of num_parameters floats, not owned: params and grads in the
  // backend's memory; host_grads the host buffer the ring reduces (equal to
  // grads for a host-memory backend).
  float* params = nullptr;
  float* grads = nullptr;
  float* host_grads = nullptr;
  // Deadline of one collective (a bucket or the broadcast).
  absl::Duration collective_timeout = absl::Seconds(30);
  // Gradient compression of the bucket all-reduces (the weight broadcast
  // stays fp32); lossy encodings with feedback keep a residual here that
  // outlives ring generations.
  GradientCompression compression;
  // May be null. A DLRM's embedding tables, kept in step with
  // the dense buffers: broadcast into a new ring after the weights, the
  // step's rows all-gathered and applied in FinishStep after the buckets,
  // rolled back with the dense state, in the digest and in what is
  // published for the evaluation.
  std::unique_ptr<RingTables> tables;
  // Largest message of the tables' collectives.
  int64_t tables_piece_bytes = int64_t{1} << 20;
  // Ring checkpoints (common/ring_checkpoint.h): the directory of the job's
  // parts (JobSpec.ring_checkpoint_dir; empty: none) on `fs` (not owned;
  // null: the POSIX file system).
  std::string checkpoint_dir;
  FileSystem* fs = nullptr;
  // Rank 0 alone writes a checkpoint, as one part holding the whole state
  // (JobSpec.ring_checkpoint_rank0; not in ring pipelines): the others
  // report theirs written at once.
  bool checkpoint_from_rank0 = false;
  // ZeRO stage 1 (JobSpec.ring_shard_optimizer_state): the member of rank r
  // in a ring of w holds the optimizer state of ShardRange(n, w, r) only
  // (its slice); the buckets are reduce-scattered to the slices' owners,
  // each member updates its slice and the params are all-gathered. Not
  // with tables, compression, rank-0 checkpoints or ring pipelines.
  bool shard_optimizer_state = false;
  // Steps may leave parameters out (AbsentGradientExchange: a job whose
  // model its PyTorch workers define): the members all-gather the ranges
  // each left out in every step and skip in the optimizer those every
  // member left out. Ring pipelines (stage steps) and compressed buckets
  // apply them as zeros.
  bool agree_on_absent = false;
  // With shard_optimizer_state and committed_steps_final: the trainer
  // leaves grads alone between steps (ExchangeBuffers.
  // grads_idle_between_steps), so a step's rollback copy of at least
  // prompt_commit_min_bytes lies in grads outside the member's slice, from
  // the step's reduce until the next BeginStep (which moves it out if the
  // step is not committed by then; WantsCommitBeforeNextStep).
  bool grads_idle_between_steps = false;
  // A member whose rollback copy is at least this large learns of each
  // commit at once (WantsPromptCommits): a model whose step takes far
  // longer than a coordinator round trip.
  int64_t prompt_commit_min_bytes = kRingPromptCommitMinBytes;
  // The trainer never writes params (only the exchange does:
  // ExchangeBuffers.params_written_only_by_exchange): the weights asked
  // for by a reader are lent to it (WeightsPublisher::Lend), not copied.
  bool lend_published_params = false;
};

class RingExchange final : public GradientExchange,
                           public EmbeddingRowExchange,
                           public EndOfTrainingExchange,
                           public CommittedStepsObserver,
                           public AbsentGradientExchange {
 public:
  // INVALID_ARGUMENT for missing backend, factory or buffers, a bad bucket
  // size, optimizer config or compression.
  static absl::StatusOr<std::unique_ptr<RingExchange>> Create(
      RingExchangeOptions options);
  // Takes a lent weights snapshot back (the publisher outlives the
  // exchange; the params buffer outlives the publisher's readers only
  // until then).
  ~RingExchange() override;

  std::string mode() const override { return "ring"; }
  // Empty batches allowed, fenced, failed steps reported, up to 60
  // failures in a row with backoff (the coordinator evicts a dead member
  // after a heartbeat timeout).
  ExchangePolicy policy() const override;
  // Before computing the lease: joins its ring (new links and a broadcast
  // of rank 0's weights into params when the ring generation changed) and
  // starts the step's all-reduce. INVALID_ARGUMENT for a lease without a
  // ring, with this worker not at its rank or with step_samples <= 0;
  // transport errors otherwise (the session is then dropped).
  absl::Status BeginStep(const ExchangeStep& step) override;
  // host_grads[offset, offset + length) is final.
  absl::Status Ready(int64_t offset, int64_t length) override;
  // AbsentGradientExchange: Ready, and with options.agree_on_absent the
  // range is this member's to leave out (worker/ring_exchange_absent.cc).
  // INVALID_ARGUMENT for a range reaching the non-trainable state.
  absl::Status ReadyAbsent(int64_t offset, int64_t length) override;
  // Waits for every bucket, then params -= optimizer(sum / step_samples).
  // On error the ring session is dropped (the next step builds a new one).
  absl::Status FinishStep() override;
  // Drops the ring session after a failed step.
  void AbandonStep() override;
  // Thread-safe: when the step in flight was leased under a fence older
  // than `fence` (the coordinator aborted it), its collective ends at once
  // with CANCELLED.
  void CancelIfOlder(int64_t fence) override;
  // CommittedStepsObserver, thread-safe: copies of the state before the
  // first `steps` steps are not needed any more (taken for the next copy).
  // A no-op unless options.committed_steps_final.
  void ObserveCommitted(int64_t steps) override;
  // A rollback copy of at least options.prompt_commit_min_bytes.
  bool WantsPromptCommits() const override;
  // The last step's rollback copy lies in grads and its step is not known
  // to be committed (options.grads_idle_between_steps).
  bool WantsCommitBeforeNextStep() const override;
  int64_t undo_state_moves() const override { return copies_.spills(); }
  bool WaitedForOthers(const absl::Status&) override { return false; }
  // EmbeddingRowExchange (with tables): the member's own tables, nullptr
  // without an open step.
  EmbeddingRowSource* embedding_rows() override;
  // EmbeddingRowExchange (with tables): the step's row gradients, applied
  // with the step in FinishStep; FAILED_PRECONDITION a second time in a step
  // or without an open step.
  absl::Status ReadyRows(const std::vector<SparseRows>& rows) override;
  // Publishes params (and the tables' blob) when a reader asked for them:
  // with options.lend_published_params, a host-memory member that holds
  // the whole buffer current lends the params themselves until it next
  // writes them (the write's first copies
  // them for a reader that has not read them yet; WeightsPublisher::Lend);
  // others publish a copy.
  void BetweenSteps() override;
  // EndOfTrainingExchange. A ring pipeline whose last generation
  // all-reduced per stage: gathers
  // every stage's current weights from the members that hold them (every
  // member of the generation must call it). DEADLINE_EXCEEDED or the
  // transport's error when a member is gone.
  absl::Status EndOfTraining() override;
  // The peer bytes under kRingPeerRole; the digest when due; this member's
  // part of the ring checkpoint when the lease asked for it.
  absl::Status AddToReport(v1::StepReport& report) override;
  // Why the ring checkpoint the lease named could not be restored.
  void AddToFailedReport(v1::StepReport& report) override;
  absl::StatusOr<std::vector<float>> FinalWeights() override {
    return HostParams();
  }
  ExchangeBytes bytes() const override { return {{}, PeerBytes()}; }

  int64_t steps_applied() const { return optimizer_.steps_applied(); }
  // The optimizer state held here, in floats (every buffer's slice).
  int64_t optimizer_state_elements() {
    return static_cast<int64_t>(optimizer_.size() *
                                optimizer_.StateBuffers().size());
  }
  size_t num_buckets() const { return plan_.size(); }
  // The rollback copies allocated (each params + optimizer state), the
  // checkpoint versions' (keep_state) not counted.
  int rollback_copies() const { return copies_.rollback_copies(); }
  // FNV-1a over the bytes of params (host copy for device backends), with
  // the tables' digest mixed in.
  absl::StatusOr<uint64_t> WeightsDigest();

 protected:
  // EndOfTrainingExchange, CommittedStepsObserver, AbsentGradientExchange;
  // EmbeddingRowExchange with tables.
  ExchangeCapability* FindCapability(std::string_view name) override;

 private:
  RingExchange(RingExchangeOptions options, std::vector<Bucket> plan,
               Optimizer optimizer, int64_t n, FlatRange slice)
      : options_(std::move(options)),
        plan_(std::move(plan)),
        optimizer_(std::move(optimizer)),
        n_(n),
        copies_(options_.backend, n, options_.committed_steps_final),
        slice_(slice) {}
  absl::Status JoinRing(const v1::NextTaskResponse& lease);
  // The session of the lease's ring generation (links, collective,
  // reducer), cancellable from then on.
  absl::Status OpenSession(const v1::NextTaskResponse& lease);

  // Sharded optimizer state (worker/ring_exchange_sharded.cc).
  // An optimizer over `slice` of the buffers, its state at zero.
  static absl::StatusOr<Optimizer> SliceOptimizer(
      const RingExchangeOptions& options, int64_t n, FlatRange slice);
  // The rest of JoinRing with sharded state: the state after lease.step()
  // steps, this member's slice of it in the new ring.
  absl::Status JoinShardedRing(const v1::NextTaskResponse& lease);
  // The slices of the state after `steps` steps from the members holding
  // them into `next` (the optimizer of `next_slice`), and the params.
  absl::Status GatherSlices(RingCollective& collective, int64_t steps,
                            bool holds, FlatRange next_slice, Optimizer& next);
  // params := every rank q's params[owned[q]] (staged through the host
  // for device backends).
  absl::Status AllGatherParams(RingCollective& collective, int64_t op,
                               const std::vector<FlatRange>& owned);
  // Reduce-scattered buckets -> this member's slice updated -> params
  // all-gathered.
  absl::Status FinishShardedStep();
  // With options.agree_on_absent, after the buckets: every member's absent
  // ranges of the step (all-gathered over the session's next op) and
  // their intersection, the elements the step's optimizer skips (empty
  // without agree_on_absent). DATA_LOSS for a member's malformed ranges;
  // the transport's errors.
  absl::StatusOr<std::vector<FlatRange>> AgreeOnAbsent();
  std::vector<FlatRange> RingSlices(int size) const;
  // Ring pipelines: every stage's range of params and optimizer state, and
  // the step count, from the lowest rank holding it current after `steps`
  // steps (rank 0, with a warning, when nobody does), over `collective`
  // with op ids [first_op, first_op + 1 + stages). Afterwards every stage
  // is current here.
  absl::Status GatherStages(RingCollective& collective, int64_t steps,
                            int64_t first_op);
  // Opens the links of the step's stage rings not open in this generation.
  absl::Status OpenStageRings(const v1::NextTaskResponse& lease);
  // All-reduces the step's stage ranges in their rings, then applies them.
  absl::Status FinishStageStep();
  // The live state copies_ are taken of and restored into.
  RingState LiveState() {
    return {options_.params + slice_.begin, &optimizer_, &current_,
            slice_.size()};
  }
  std::vector<FlatRange> CurrentRanges() const;
  TransferBytes PeerBytes() const {
    return options_.counter == nullptr ? TransferBytes{}
                                       : options_.counter->Get();
  }
  absl::StatusOr<std::vector<float>> HostParams();
  // The elements of `ranges` (ascending, disjoint) of the params on the
  // host, back to back; no ranges: all of them.
  // Before params change: a lent snapshot goes back to the publisher
  // (WeightsPublisher::TakeBack).
  void TakeBackWeights();
  absl::StatusOr<std::vector<float>> HostRanges(
      const std::vector<FlatRange>& ranges);
  // The params readable on the host: in place for host-memory backends,
  // else copied into `copy`.
  absl::StatusOr<const float*> ParamsOnHost(std::vector<float>& copy);
  // Puts the state (and the tables) back to after `steps` steps from a
  // copy. FAILED_PRECONDITION when no copy of that step is kept.
  absl::Status RollBackTo(int64_t steps);
  // host_grads / step_samples through the optimizer into params (only
  // `ranges` when given).
  absl::Status ApplyDense(
      const std::vector<Optimizer::Range>* ranges = nullptr);
  // Rank 0's params, optimizer state and step count to every member.
  absl::Status BroadcastState(RingCollective& collective, int root);
  // The live params and `into`'s state (the optimizer of `slice`) := the
  // ring checkpoint at `version` (the rollback copies forgotten). ABORTED
  // naming the checkpoint and why it cannot be loaded.
  absl::Status RestoreCheckpoint(int64_t version, Optimizer& into,
                                 FlatRange slice);
  // This member's parts of the ring checkpoint after the step just applied
  // (rank `rank` of a ring of `parts`; a pipeline's from stage_holders_).
  absl::Status WriteCheckpointPart(int rank, int parts);
  FileSystem* fs() const {
    return options_.fs != nullptr ? options_.fs : PosixFileSystem();
  }

  struct StageRingLink {
    std::unique_ptr<RingTransport> transport;
    std::unique_ptr<RingCollective> collective;
  };
  struct Session {
    int64_t ring_generation = 0;
    int64_t fence = 0;
    std::unique_ptr<RingTransport> transport;
    std::unique_ptr<RingCollective> collective;
    std::unique_ptr<BucketAllReducer> reducer;
    std::map<int, StageRingLink> stage_links;  // by stage
    bool per_stage = false;  // its steps all-reduced per stage
    int64_t next_op = 0;
    int64_t gather_op = 0;  // sharded state: the open step's params gather
  };

  const RingExchangeOptions options_;
  const std::vector<Bucket> plan_;
  Optimizer optimizer_;
  const int64_t n_;
  RingStateCopies copies_;
  // The elements whose optimizer state this member holds: all of them,
  // unless the state is sharded (then its slice in the ring it last
  // joined, and that ring's generation, size and this member's rank;
  // size 0: no slice held).
  FlatRange slice_;
  struct HeldSlice {
    int64_t generation = 0;
    int size = 0;
    int rank = 0;
  };
  HeldSlice held_;

  std::unique_ptr<Session>
      session_;  // written by the training thread under cancel_mu_
  absl::Mutex cancel_mu_;
  int64_t step_fence_ ABSL_GUARDED_BY(cancel_mu_) = 0;
  int64_t step_samples_ = 0;
  bool keep_state_ = false;             // the open step's lease asked for it
  bool rows_declared_ = false;          // ReadyRows called in the open step
  std::vector<FlatRange> step_absent_;  // ReadyAbsent's, in the open step
  // Ring pipelines: the stages' ranges, which of them are current here, the
  // open step's stage rings and each range's holders (ExchangeStep), its
  // first op id and the elements declared.
  std::vector<FlatRange> stage_ranges_;
  std::vector<bool> current_;
  std::vector<ExchangeStep::StageRing> step_rings_;
  std::vector<std::vector<int>> stage_holders_;
  int64_t step_first_op_ = 0;
  int64_t declared_ = 0;
  std::unique_ptr<ErrorFeedback> feedback_;  // null: no error feedback
  // The open step's lease asked for a checkpoint part: its rank and ring
  // size (parts <= 0: not asked).
  int checkpoint_rank_ = 0;
  int checkpoint_parts_ = 0;
  std::string restore_error_;  // the last failed restore's, until reported
};

}  // namespace ferry

#endif  // FERRY_WORKER_RING_EXCHANGE_H_

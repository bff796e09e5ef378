#include "worker/ring_exchange.h"

#include <cstdio>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/range_sets.h"
#include "common/ring_checkpoint.h"
#include "common/sharding.h"
#include "common/status_macros.h"
#include "ring/ring_peer_service.h"

namespace ferry {
namespace {
// Op id 0 of every ring session is the broadcast of rank 0's weights.
constexpr int64_t kBroadcastOp = 0;

// FNV-1a over `n` bytes, continuing from `hash`.
constexpr uint64_t kFnvOffset = 1469598103934665603ull;
uint64_t Fnv1a(uint64_t hash, const void* data, size_t n) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) hash = (hash ^ bytes[i]) * 1099511628211ull;
  return hash;
}
}  // namespace

absl::StatusOr<std::unique_ptr<RingExchange>> RingExchange::Create(
    RingExchangeOptions options) {
  if (options.backend == nullptr || !options.connect ||
      options.params == nullptr || options.grads == nullptr ||
      options.host_grads == nullptr) {
    return absl::InvalidArgumentError(
        "ring exchange: missing backend, transport factory or buffers");
  }
  const int64_t n = std::accumulate(options.tensor_sizes.begin(),
                                    options.tensor_sizes.end(), int64_t{0});
  ASSIGN_OR_RETURN(
      std::vector<Bucket> plan,
      PlanBucketsWithState(options.tensor_sizes, options.bucket_elements,
                           options.state_elements));
  if (options.state_elements < 0 || options.state_elements > n) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring exchange: ", options.state_elements,
                     " state elements in a model of ", n));
  }
  RETURN_IF_ERROR(ValidateCompression(options.compression));
  if (options.shard_optimizer_state &&
      (options.tables != nullptr || options.compression.compressed() ||
       options.checkpoint_from_rank0)) {
    return absl::InvalidArgumentError(
        "ring exchange: sharded optimizer state does not go with embedding "
        "tables, gradient compression or rank-0 checkpoints");
  }
  // Sharded: no slice until the first ring is joined.
  const FlatRange slice =
      options.shard_optimizer_state ? FlatRange{0, 0} : FlatRange{0, n};
  ASSIGN_OR_RETURN(Optimizer optimizer, SliceOptimizer(options, n, slice));
  const bool feedback = options.compression.uses_feedback();
  auto exchange = std::unique_ptr<RingExchange>(new RingExchange(
      std::move(options), std::move(plan), std::move(optimizer), n, slice));
  if (feedback) exchange->feedback_ = std::make_unique<ErrorFeedback>(n);
  return exchange;
}

absl::Status RingExchange::JoinRing(const v1::NextTaskResponse& lease) {
  {
    absl::MutexLock lock(&cancel_mu_);
    session_.reset();  // closes the old links first
  }
  if (options_.shard_optimizer_state) {
    RETURN_IF_ERROR(OpenSession(lease));
    return JoinShardedRing(lease);
  }
  if (lease.has_restore_checkpoint() && lease.rank() == 0) {
    RETURN_IF_ERROR(
        RestoreCheckpoint(lease.restore_checkpoint(), optimizer_, slice_));
  }
  // The ring starts from the state after exactly lease.step() steps.
  const int64_t have = optimizer_.steps_applied();
  if (have > lease.step()) {
    absl::Status rolled = RollBackTo(lease.step());
    if (!rolled.ok() && lease.rank() == 0) {
      // Ranks follow join order: when the oldest member holds no copy of
      // that state, no member does (they all joined after it: a hybrid
      // shard rolled back to a checkpoint older than the ring). Refusing
      // would stall the job for good; it goes on from rank 0's state, whose
      // dense layers keep the undone steps' updates.
      LogWarn(
          "ring resumes from rank 0's newer state: no member holds the state "
          "the job went back to; the dense layers keep the undone steps' "
          "updates",
          {{"rank0_steps", have},
           {"resume_step", lease.step()},
           {"why", std::string(rolled.message())}});
    }
  } else if (have < lease.step() && lease.rank() == 0) {
    LogWarn(
        "ring resumes from rank 0's older state: the members that held the "
        "newer "
        "state are all gone",
        {{"rank0_steps", have}, {"resume_step", lease.step()}});
  }
  RETURN_IF_ERROR(OpenSession(lease));
  RingCollective* collective = session_->collective.get();
  if (!stage_ranges_.empty()) {
    return GatherStages(*collective, lease.step(), kBroadcastOp);
  }
  RETURN_IF_ERROR(BroadcastState(*collective, 0));
  if (options_.tables == nullptr) return absl::OkStatus();
  // Two ops: the members' table digests, then (unless all equal) rank 0's
  // tables.
  const int64_t op = session_->next_op;
  session_->next_op += 2;
  ASSIGN_OR_RETURN(const bool sent,
                   options_.tables->Broadcast(
                       *session_->transport, op, 0, options_.tables_piece_bytes,
                       absl::Now() + options_.collective_timeout));
  if (sent) LogInfo("ring: rank 0's embedding tables broadcast");
  return absl::OkStatus();
}

absl::Status RingExchange::OpenSession(const v1::NextTaskResponse& lease) {
  auto session = std::make_unique<Session>();
  session->ring_generation = lease.ring_generation();
  session->fence = lease.fence();
  ASSIGN_OR_RETURN(session->transport, options_.connect(lease));
  RingCollectiveOptions copts;
  copts.timeout = options_.collective_timeout;
  session->collective =
      std::make_unique<RingCollective>(session->transport.get(), copts);
  session->reducer = std::make_unique<BucketAllReducer>(
      session->collective.get(), plan_, options_.host_grads,
      options_.compression,
      feedback_ == nullptr ? nullptr : feedback_->residual());
  session->reducer->set_uncompressed_from(n_ - options_.state_elements);
  if (options_.shard_optimizer_state) {
    session->reducer->set_reduce_scatter(RingSlices(lease.ring_size()));
  }
  // Ring pipelines: op 0 finds who holds which stage, 1..P gather them.
  session->next_op =
      kBroadcastOp + 1 + static_cast<int64_t>(stage_ranges_.size());
  absl::MutexLock lock(&cancel_mu_);  // cancellable from here on
  session_ = std::move(session);
  return absl::OkStatus();
}

absl::Status RingExchange::BroadcastState(RingCollective& collective,
                                          int root) {
  // One host buffer: params, each optimizer state buffer, the step count
  // (an int64 in the bits of two floats; a broadcast copies bits).
  std::vector<DeviceBuffer*> state = optimizer_.StateBuffers();
  const int64_t total = n_ * (1 + static_cast<int64_t>(state.size())) + 2;
  std::vector<float> host(total);
  ComputeBackend* backend = options_.backend;
  const bool sender = session_->transport->rank() == root;
  if (sender) {
    RETURN_IF_ERROR(backend->CopyToHost(options_.params, n_, host.data()));
    for (size_t k = 0; k < state.size(); ++k) {
      RETURN_IF_ERROR(backend->CopyToHost(state[k]->data(), n_,
                                          host.data() + n_ * (k + 1)));
    }
    const int64_t steps = optimizer_.steps_applied();
    std::memcpy(host.data() + total - 2, &steps, sizeof(steps));
  }
  RETURN_IF_ERROR(collective.Broadcast(kBroadcastOp, host.data(), total, root));
  if (sender) return absl::OkStatus();
  RETURN_IF_ERROR(backend->CopyToDevice(host.data(), n_, options_.params));
  for (size_t k = 0; k < state.size(); ++k) {
    RETURN_IF_ERROR(backend->CopyToDevice(host.data() + n_ * (k + 1), n_,
                                          state[k]->data()));
  }
  int64_t steps = 0;
  std::memcpy(&steps, host.data() + total - 2, sizeof(steps));
  optimizer_.set_steps_applied(steps);
  return backend->Synchronize();
}

absl::Status RingExchange::RollBackTo(int64_t steps) {
  RETURN_IF_ERROR(copies_.CheckKept(steps, optimizer_.steps_applied()));
  if (options_.tables != nullptr) {
    RETURN_IF_ERROR(
        options_.tables->RollBackTo(optimizer_.steps_applied(), steps));
  }
  return copies_.RestoreTo(steps, LiveState());
}

ExchangePolicy RingExchange::policy() const {
  ExchangePolicy policy;
  policy.allow_empty_batch = true;
  policy.fenced = true;
  policy.report_failed_steps = true;
  policy.max_consecutive_failures = 60;
  policy.backoff_after_failure = true;
  return policy;
}

absl::Status RingExchange::BeginStep(const ExchangeStep& step) {
  const v1::NextTaskResponse& lease = *step.lease;
  if (lease.ring_size() == 0 || lease.rank() < 0 ||
      lease.rank() >= lease.ring_size() || lease.step_samples() <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ring lease for step %d: rank %d in a ring of %d, %d samples",
        lease.step(), lease.rank(), lease.ring_size(), lease.step_samples()));
  }
  if (lease.ring(lease.rank()).worker_id() != options_.worker_id) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ring lease for step %d puts %s, not %s, at rank %d",
                        lease.step(), lease.ring(lease.rank()).worker_id(),
                        options_.worker_id, lease.rank()));
  }
  if (step.buffers != nullptr) {
    return absl::InvalidArgumentError(
        "ring steps run on the whole buffer the exchange was made with");
  }
  {
    absl::MutexLock lock(&cancel_mu_);
    step_fence_ = lease.fence();
  }
  ObserveCommitted(lease.committed_steps());
  if (options_.shard_optimizer_state && !step.stage_ranges.empty()) {
    return absl::InvalidArgumentError(
        "ring pipelines do not shard the optimizer state");
  }
  if (!step.stage_ranges.empty() && step.stage_ranges != stage_ranges_) {
    // A pipeline job's first step: the job's initial values everywhere.
    stage_ranges_ = step.stage_ranges;
    current_.assign(stage_ranges_.size(), true);
  }
  if (session_ == nullptr ||
      session_->ring_generation != lease.ring_generation()) {
    TakeBackWeights();  // a join writes the params
    if (absl::Status joined = JoinRing(lease); !joined.ok()) {
      AbandonStep();
      return joined;
    }
  }
  step_samples_ = lease.step_samples();
  keep_state_ = lease.keep_state();
  checkpoint_rank_ = lease.rank();
  checkpoint_parts_ = lease.checkpoint() ? lease.ring_size() : 0;
  rows_declared_ = false;
  step_absent_.clear();
  if (options_.tables != nullptr) options_.tables->ClearStepRows();
  step_rings_ = step.stage_rings;
  stage_holders_ = step.stage_holders;
  session_->per_stage = !step_rings_.empty();
  if (session_->per_stage) {
    if (absl::Status opened = OpenStageRings(lease); !opened.ok()) {
      AbandonStep();
      return opened;
    }
    // Every member of the generation takes one op id per stage per step.
    step_first_op_ = session_->next_op;
    session_->next_op += static_cast<int64_t>(stage_ranges_.size());
    declared_ = 0;
    return absl::OkStatus();
  }
  session_->reducer->Start(session_->next_op);
  session_->next_op += static_cast<int64_t>(plan_.size());
  if (options_.shard_optimizer_state) session_->gather_op = session_->next_op++;
  // The trainer writes the gradients from here on.
  const int64_t spills = copies_.spills();
  if (absl::Status taken = copies_.TakeBackLent(); !taken.ok()) {
    AbandonStep();
    return taken;
  }
  if (copies_.spills() > spills && copies_.spills() % 100 == 1) {
    LogInfo(
        "ring: the last step's rollback copy moved out of the gradient "
        "buffer (the step was not committed before this one began)",
        {{"step", lease.step()},
         {"committed_steps", copies_.committed()},
         {"spills", copies_.spills()}});
  }
  return absl::OkStatus();
}

absl::Status RingExchange::Ready(int64_t offset, int64_t length) {
  if (session_ == nullptr)
    return absl::FailedPreconditionError("no ring step begun");
  if (!step_rings_.empty()) {
    if (offset < 0 || length < 0 || offset + length > n_ ||
        declared_ + length > n_) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "ring step: gradient range [%d, %d) outside the %d elements or "
          "declared twice",
          offset, offset + length, n_));
    }
    declared_ += length;
    return absl::OkStatus();
  }
  return session_->reducer->Ready(offset, length);
}

void RingExchange::ObserveCommitted(int64_t steps) {
  copies_.ObserveCommitted(steps);
}

bool RingExchange::WantsCommitBeforeNextStep() const {
  return copies_.LentCopyPending();
}

bool RingExchange::WantsPromptCommits() const {
  return options_.committed_steps_final &&
         copies_.copy_bytes() >= options_.prompt_commit_min_bytes;
}

absl::Status RingExchange::FinishStep() {
  if (session_ == nullptr)
    return absl::FailedPreconditionError("no ring step begun");
  TakeBackWeights();  // the step's update writes the params
  if (!step_rings_.empty()) return FinishStageStep();
  if (options_.shard_optimizer_state) return FinishShardedStep();
  if (absl::Status reduced = session_->reducer->Finish(); !reduced.ok()) {
    AbandonStep();
    return reduced;
  }
  absl::StatusOr<std::vector<FlatRange>> skip = AgreeOnAbsent();
  if (!skip.ok()) {
    AbandonStep();
    return skip.status();
  }
  const int64_t steps = optimizer_.steps_applied();
  RETURN_IF_ERROR(copies_.Keep(LiveState(), keep_state_));
  if (options_.tables != nullptr) {
    // Every member's rows, then the same row update on every member; a
    // failure leaves the tables and the dense state as they were.
    absl::Status applied = options_.tables->ApplyStep(
        *session_->transport, session_->next_op++, steps, step_samples_,
        options_.tables_piece_bytes, absl::Now() + options_.collective_timeout);
    if (!applied.ok()) {
      AbandonStep();
      return applied;
    }
  }
  std::vector<Optimizer::Range> applied;
  for (const FlatRange& r : ComplementRangeSet(*skip, 0, n_)) {
    applied.push_back(
        {static_cast<size_t>(r.begin), static_cast<size_t>(r.end)});
  }
  absl::Status dense = ApplyDense(skip->empty() ? nullptr : &applied);
  if (!dense.ok() && options_.tables != nullptr) {
    // The step is not applied: its rows go back too.
    (void)options_.tables->RollBackTo(steps + 1, steps);
  }
  return dense;
}

absl::Status RingExchange::ApplyDense(
    const std::vector<Optimizer::Range>* ranges) {
  const std::vector<Optimizer::Range> whole = {{0, static_cast<size_t>(n_)}};
  if (ranges == nullptr) ranges = &whole;
  ComputeBackend* backend = options_.backend;
  // Only the ranges applied are copied and scaled (a stage's layers).
  for (const Optimizer::Range& r : *ranges) {
    const size_t len = r.end - r.begin;
    if (!backend->IsHostMemory()) {
      RETURN_IF_ERROR(backend->CopyToDevice(options_.host_grads + r.begin, len,
                                            options_.grads + r.begin));
    }
    RETURN_IF_ERROR(backend->Scale(len,
                                   1.0f / static_cast<float>(step_samples_),
                                   options_.grads + r.begin));
  }
  return optimizer_.ApplyRanges(options_.grads, options_.params, *ranges);
}

ExchangeCapability* RingExchange::FindCapability(std::string_view name) {
  if (ExchangeCapability* c = Offer<EndOfTrainingExchange>(this, name)) {
    return c;
  }
  if (ExchangeCapability* c = Offer<CommittedStepsObserver>(this, name)) {
    return c;
  }
  if (ExchangeCapability* c = Offer<AbsentGradientExchange>(this, name)) {
    return c;
  }
  return options_.tables != nullptr ? Offer<EmbeddingRowExchange>(this, name)
                                    : nullptr;
}

EmbeddingRowSource* RingExchange::embedding_rows() {
  if (options_.tables == nullptr || session_ == nullptr) return nullptr;
  return options_.tables->rows();
}

absl::Status RingExchange::ReadyRows(const std::vector<SparseRows>& rows) {
  if (options_.tables == nullptr) {
    return absl::UnimplementedError("this ring job has no embedding tables");
  }
  if (session_ == nullptr) {
    return absl::FailedPreconditionError("no ring step begun");
  }
  if (rows_declared_) {
    return absl::FailedPreconditionError(
        "ring: the step's rows were declared already");
  }
  rows_declared_ = true;
  return options_.tables->SetStepRows(rows);
}

void RingExchange::AbandonStep() {
  // Abort first: a bucket in flight then ends at once instead of running
  // into its deadline while the reducer is destroyed.
  absl::MutexLock lock(&cancel_mu_);
  if (session_ != nullptr) {
    session_->transport->Abort();
    for (auto& [stage, link] : session_->stage_links) link.transport->Abort();
  }
  session_.reset();
}

void RingExchange::CancelIfOlder(int64_t fence) {
  absl::MutexLock lock(&cancel_mu_);
  if (session_ != nullptr && step_fence_ < fence) {
    LogWarn("the coordinator aborted the ring step: giving it up",
            {{"fence", fence}});
    session_->transport->Abort();
    for (auto& [stage, link] : session_->stage_links) link.transport->Abort();
  }
}

absl::Status RingExchange::AddToReport(v1::StepReport& report) {
  if (options_.digest_every > 0 && !stage_ranges_.empty() &&
      optimizer_.steps_applied() % options_.digest_every == 0) {
    std::vector<float> copy;
    ASSIGN_OR_RETURN(const float* params, ParamsOnHost(copy));
    for (const FlatRange& range : CurrentRanges()) {
      v1::RangeDigest* d = report.add_range_digests();
      d->set_begin(range.begin);
      d->set_end(range.end);
      d->set_digest(Fnv1a(kFnvOffset, params + range.begin,
                          static_cast<size_t>(range.size()) * sizeof(float)));
    }
  } else if (options_.digest_every > 0 &&
             optimizer_.steps_applied() % options_.digest_every == 0) {
    ASSIGN_OR_RETURN(const uint64_t digest, WeightsDigest());
    report.set_weights_digest(digest);
  }
  AddRoleBytes(kRingPeerRole, PeerBytes(), report.mutable_bytes());
  if (checkpoint_parts_ > 0) {
    const absl::Status written =
        WriteCheckpointPart(checkpoint_rank_, checkpoint_parts_);
    checkpoint_parts_ = 0;
    if (written.ok()) {
      report.set_checkpoint_written(true);
    } else {
      LogWarn("ring checkpoint part not written",
              {{"version", optimizer_.steps_applied()},
               {"why", written.ToString()}});
      report.set_checkpoint_error(written.ToString());
    }
  }
  return absl::OkStatus();
}

void RingExchange::AddToFailedReport(v1::StepReport& report) {
  if (restore_error_.empty()) return;
  report.set_restore_error(restore_error_);
  restore_error_.clear();
}

absl::Status RingExchange::WriteCheckpointPart(int rank, int parts) {
  if (options_.checkpoint_dir.empty()) {
    return absl::FailedPreconditionError(
        "the job has no ring checkpoint directory");
  }
  std::vector<RingCheckpointPart> own;
  if (stage_ranges_.empty() && options_.checkpoint_from_rank0) {
    if (rank != 0) return absl::OkStatus();  // rank 0 writes it all
    own.push_back({0, 1, FlatRange{0, n_}});
  } else if (stage_ranges_.empty()) {
    own.push_back({rank, parts, ShardRange(n_, parts, rank)});
  } else {
    ASSIGN_OR_RETURN(
        own, RingCheckpointPartsOf(stage_ranges_, stage_holders_, rank));
  }
  std::vector<DeviceBuffer*> state = optimizer_.StateBuffers();
  ComputeBackend* backend = options_.backend;
  for (const RingCheckpointPart& p : own) {
    const int64_t begin = p.range.begin;
    const int64_t len = p.range.size();
    if (begin < slice_.begin || begin + len > slice_.end) {
      return absl::InternalError(absl::StrFormat(
          "ring checkpoint part [%d, %d) outside the optimizer state held, "
          "[%d, %d)",
          begin, begin + len, slice_.begin, slice_.end));
    }
    CheckpointDenseView dense;
    dense.identity = RingCheckpointPartIdentity(options_.job_id, p);
    dense.version = optimizer_.steps_applied();
    dense.steps_applied = dense.version;
    // Host memory is written in place; a device's state through host
    // copies.
    ShardCheckpoint copy;
    if (backend->IsHostMemory()) {
      dense.params = {options_.params + begin, static_cast<size_t>(len)};
      for (DeviceBuffer* buffer : state) {
        dense.state.emplace_back(buffer->data() + begin - slice_.begin,
                                 static_cast<size_t>(len));
      }
    } else {
      copy.params.resize(static_cast<size_t>(len));
      RETURN_IF_ERROR(backend->CopyToHost(options_.params + begin, len,
                                          copy.params.data()));
      for (DeviceBuffer* buffer : state) {
        std::vector<float>& host =
            copy.state.emplace_back(static_cast<size_t>(len));
        RETURN_IF_ERROR(backend->CopyToHost(
            buffer->data() + begin - slice_.begin, len, host.data()));
      }
      dense.params = copy.params;
      for (const std::vector<float>& host : copy.state) {
        dense.state.emplace_back(host);
      }
    }
    // The tables are the same on every member: part 0 carries them.
    std::vector<TableCheckpoint> tables;
    if (p.index == 0 && options_.tables != nullptr) {
      tables = options_.tables->store().Export();
    }
    RETURN_IF_ERROR(
        WriteRingCheckpointPart(fs(), options_.checkpoint_dir, dense, tables)
            .status());
  }
  return absl::OkStatus();
}

absl::Status RingExchange::RestoreCheckpoint(int64_t version, Optimizer& into,
                                             FlatRange slice) {
  const std::vector<DeviceBuffer*> state = into.StateBuffers();
  absl::StatusOr<RingCheckpoint> checkpoint =
      options_.checkpoint_dir.empty()
          ? absl::FailedPreconditionError(
                "the job has no ring checkpoint directory")
          : LoadRingCheckpoint(fs(), options_.checkpoint_dir, options_.job_id,
                               version, n_, state.size());
  absl::Status loaded = checkpoint.status();
  if (loaded.ok() && options_.tables != nullptr) {
    // Tables first: they change only on success, so a refused checkpoint
    // leaves this member's state whole.
    loaded = checkpoint->tables.empty()
                 ? absl::DataLossError("it holds no embedding tables")
                 : options_.tables->RestoreCheckpoint(checkpoint->tables);
  }
  if (loaded.ok()) {
    ComputeBackend* backend = options_.backend;
    loaded =
        backend->CopyToDevice(checkpoint->params.data(), n_, options_.params);
    for (size_t k = 0; loaded.ok() && k < state.size(); ++k) {
      loaded = backend->CopyToDevice(checkpoint->state[k].data() + slice.begin,
                                     slice.size(), state[k]->data());
    }
    if (loaded.ok()) loaded = backend->Synchronize();
  }
  if (!loaded.ok()) {
    restore_error_ = loaded.ToString();
    return absl::AbortedError(
        absl::StrCat("the ring checkpoint at version ", version,
                     " cannot be restored: ", loaded.message()));
  }
  into.set_steps_applied(checkpoint->steps_applied);
  // Every stage of a pipeline is current here now: GatherStages takes
  // them all from this member.
  current_.assign(stage_ranges_.size(), true);
  copies_.Forget();  // copies of states the job no longer went through
  LogInfo("ring: restored the ring checkpoint",
          {{"version", version},
           {"dir", options_.checkpoint_dir},
           {"slice_begin", slice.begin},
           {"slice_end", slice.end}});
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> RingExchange::WeightsDigest() {
  std::vector<float> copy;
  ASSIGN_OR_RETURN(const float* params, ParamsOnHost(copy));
  uint64_t hash =
      Fnv1a(kFnvOffset, params, static_cast<size_t>(n_) * sizeof(float));
  if (options_.tables != nullptr) {
    const uint64_t tables = options_.tables->Digest();
    hash = Fnv1a(hash, &tables, sizeof(tables));
  }
  return hash;
}

}  // namespace ferry

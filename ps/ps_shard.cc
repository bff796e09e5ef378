#include "ps/ps_shard.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/optimizer_config.h"
#include "common/peer_limits.h"
#include "common/prometheus_metrics.h"
#include "common/range_sets.h"
#include "common/status_macros.h"
#include "common/step_trace.h"
#include "compute/cpu_backend.h"

namespace ferry {

static_assert(std::endian::native == std::endian::little,
              "chunks travel as little-endian fp32 and are copied as is");

namespace {
absl::Status Rejected(absl::string_view op, absl::Status status) {
  return Metrics().Reject(MetricRole::kPs, op, std::move(status));
}

absl::Status ShutDownError(int32_t shard_id) {
  return absl::UnavailableError(
      absl::StrFormat("shard %d is shutting down", shard_id));
}

// The chunks of `all` placed on `shard`, in flat order.
std::vector<Chunk> OwnedBy(const std::vector<Chunk>& all, int32_t shard) {
  std::vector<Chunk> owned;
  for (const Chunk& chunk : all) {
    if (chunk.shard == shard) owned.push_back(chunk);
  }
  return owned;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PsShard>> PsShard::Create(PsShardConfig config) {
  if (config.job_id.empty()) {
    return absl::InvalidArgumentError("job_id must not be empty");
  }
  if (config.num_shards < 1 || config.shard_id < 0 ||
      config.shard_id >= config.num_shards) {
    return absl::InvalidArgumentError(
        absl::StrFormat("shard_id %d is not in [0, num_shards=%d)",
                        config.shard_id, config.num_shards));
  }
  ASSIGN_OR_RETURN(std::vector<Chunk> chunks,
                   PlaceChunks(config.tensor_sizes, config.num_shards,
                               config.max_chunk_elements, config.chunk_cuts));
  int64_t total = 0;
  for (int64_t size : config.tensor_sizes) total += size;
  const FlatRange range = ShardRange(total, config.num_shards, config.shard_id);
  if (static_cast<int64_t>(config.initial_slice.size()) != range.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "initial_slice has %d elements, shard %d owns %d ([%d, %d))",
        config.initial_slice.size(), config.shard_id, range.size(), range.begin,
        range.end));
  }
  for (size_t i = 0; i < config.initial_slice.size(); ++i) {
    if (!std::isfinite(config.initial_slice[i])) {
      return absl::InvalidArgumentError(
          absl::StrFormat("initial_slice[%d] is not finite", i));
    }
  }
  if (config.state_elements < 0 || config.state_elements > total) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d state elements in a model of %d", config.state_elements, total));
  }
  // The state is a suffix of the model, so of every slice it reaches.
  const int64_t trainable = std::clamp<int64_t>(
      total - config.state_elements - range.begin, 0, range.size());
  std::unique_ptr<ComputeBackend> backend = MakeCpuBackend(1);
  ASSIGN_OR_RETURN(
      Optimizer optimizer,
      Optimizer::Create(config.optimizer, backend.get(),
                        static_cast<size_t>(range.size()),
                        static_cast<size_t>(trainable), range.begin));
  std::unique_ptr<SparseStore> sparse;
  if (config.sparse.has_value()) {
    config.sparse->shard_id = config.shard_id;
    config.sparse->num_shards = config.num_shards;
    ASSIGN_OR_RETURN(sparse, SparseStore::Create(*config.sparse));
  }
  std::vector<float> params = std::move(config.initial_slice);
  config.initial_slice.clear();  // the slice lives in slice_ only
  std::vector<Chunk> owned = OwnedBy(chunks, config.shard_id);
  auto shard = std::unique_ptr<PsShard>(
      new PsShard(std::move(config), range, std::move(chunks), std::move(owned),
                  std::move(params), std::move(backend), std::move(optimizer)));
  shard->sparse_ = std::move(sparse);
  return shard;
}

PsShard::PsShard(PsShardConfig config, FlatRange range,
                 std::vector<Chunk> all_chunks, std::vector<Chunk> owned,
                 std::vector<float> params,
                 std::unique_ptr<ComputeBackend> backend, Optimizer optimizer)
    : config_(std::move(config)),
      all_chunks_(std::move(all_chunks)),
      range_(range),
      owned_(std::move(owned)),
      first_owned_id_(owned_.empty() ? 0 : owned_.front().id),
      slice_(config_.shard_id, std::move(backend), std::move(optimizer),
             std::move(params)),
      ledger_(config_.shard_id),
      grads_(static_cast<size_t>(range_.size())),
      arrival_(config_.sum_on_arrival &&
                   config_.consistency == PsConsistency::kSync &&
                   !owned_.empty(),
               config_.shard_id, owned_, range_.begin, range_.size()) {}

absl::Status PsShard::RejectLocked(absl::Status status) {
  mu_.AssertHeld();
  counters_.CountRejected();
  return Rejected("push", std::move(status));
}

absl::Status PsShard::RejectPush(absl::Status status) {
  absl::MutexLock lock(&mu_);
  return RejectLocked(std::move(status));
}

absl::Status PsShard::CheckHeaderLocked(const PsPushHeader& h) const {
  mu_.AssertHeld();
  if (updates_stopped_) return StoppedError();
  RETURN_IF_ERROR(CheckIdLength("the push's job_id", h.job_id));
  RETURN_IF_ERROR(CheckIdLength("the push's worker_id", h.worker_id));
  if (h.job_id != config_.job_id) {
    return absl::FailedPreconditionError(
        absl::StrFormat("push for job '%s', this shard serves job '%s'",
                        h.job_id, config_.job_id));
  }
  if (h.worker_id.empty()) {
    return absl::InvalidArgumentError("push header has no worker_id");
  }
  // A sync push may sum no samples of its own (a pipeline stage whose
  // replica's samples another stage counts); the step's set has some.
  const int64_t least = config_.consistency == PsConsistency::kSync ? 0 : 1;
  if (h.num_samples < least) {
    return absl::InvalidArgumentError(
        absl::StrFormat("push from %s: num_samples must be >= %d, got %d",
                        h.worker_id, least, h.num_samples));
  }
  if (h.base_version < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "push from %s: negative base_version %d", h.worker_id, h.base_version));
  }
  if (h.generation < max_generation_) {
    return absl::AbortedError(absl::StrFormat(
        "push from %s has generation %d, older than generation %d", h.worker_id,
        h.generation, max_generation_));
  }
  if (!h.step_contributors.empty()) {
    if (config_.consistency != PsConsistency::kSync) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "push from %s names step contributors; they are for sync mode only",
          h.worker_id));
    }
    const std::string what = absl::StrCat("push from ", h.worker_id);
    RETURN_IF_ERROR(CheckStepContributors(what, h.step_contributors,
                                          config_.limits.max_step_pushes));
    const bool named = std::any_of(
        h.step_contributors.begin(), h.step_contributors.end(),
        [&](const PsContributor& c) {
          return c.worker_id == h.worker_id && c.num_samples == h.num_samples;
        });
    if (!named) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: its step contributors (%s) do not name it with its %d samples",
          what, DescribeContributors(h.step_contributors), h.num_samples));
    }
  }
  const int64_t version = slice_.version();
  if (config_.consistency == PsConsistency::kSync) {
    return ledger_.CheckSyncPush(h.worker_id, h.step, h.num_samples, version,
                                 config_.limits.max_step_pushes);
  }
  if (h.base_version > version) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "push from %s: base_version %d is ahead of the shard's version %d",
        h.worker_id, h.base_version, version));
  }
  return ledger_.CheckAsyncPush(h.worker_id, h.step,
                                config_.limits.max_async_workers);
}

absl::StatusOr<std::unique_ptr<PsPushStaging>> PsShard::BeginPush(
    const PsPushHeader& header) {
  auto staging = std::make_unique<PsPushStaging>();
  {
    absl::MutexLock lock(&mu_);
    absl::Status status = CheckHeaderLocked(header);
    const int64_t open = open_pushes_->load();
    if (status.ok() && open >= config_.limits.max_open_pushes) {
      status = LimitExceeded("the number of pushes being received", open + 1,
                             config_.limits.max_open_pushes);
    }
    if (!status.ok()) return RejectLocked(std::move(status));
    open_pushes_->fetch_add(1);
    staging->open_pushes_ = open_pushes_;
    staging->rollbacks_ = rollbacks_;
  }
  staging->begun_ = absl::Now();
  staging->header_ = header;
  // Every owned element is written by exactly one chunk before a commit, so
  // a recycled buffer needs no clearing. On arrival, chunks go to the sum.
  staging->on_arrival_ = arrival_.enabled();
  if (!staging->on_arrival_) staging->grad_ = TakeGradBuffer();
  if (config_.consistency == PsConsistency::kAsync && !staging->on_arrival_)
    staging->divide_by_ = static_cast<float>(header.num_samples);
  staging->seen_.assign(owned_.size(), false);
  return staging;
}

absl::StatusOr<int64_t> PsShard::CommitPush(
    std::unique_ptr<PsPushStaging> staging) {
  if (!staging->error_.ok()) return staging->error_;
  if (staging->chunks_seen_ != static_cast<int64_t>(owned_.size())) {
    for (size_t i = 0; i < owned_.size(); ++i) {
      if (!staging->seen_[i]) {
        return RejectPush(absl::InvalidArgumentError(absl::StrFormat(
            "push from %s is missing chunk %d (%d of %d chunks received)",
            staging->header_.worker_id, owned_[i].id, staging->chunks_seen_,
            owned_.size())));
      }
    }
  }
  const PsPushHeader& h = staging->header_;
  std::vector<float>& grad = staging->grad_;
  // Async chunks landed divided by the push's samples (AddChunk).
  // Chunks come in any order; their absent ranges are disjoint.
  const std::vector<FlatRange> absent =
      NormalizeRanges(std::move(staging->absent_));
  ReadyList ready;
  int64_t version = 0;
  {
    absl::MutexLock lock(&mu_);
    absl::Status status = CheckHeaderLocked(h);
    if (status.ok() && staging->rollbacks_ != rollbacks_) {
      status = absl::AbortedError(absl::StrFormat(
          "push from %s: shard %d was rolled back to version %d while the "
          "push was received",
          h.worker_id, config_.shard_id, slice_.version()));
    }
    if (!status.ok()) return RejectLocked(std::move(status));
    if (config_.consistency == PsConsistency::kSync) {
      ledger_.Hold(h.worker_id,
                   PsContribution{h.num_samples, std::move(grad),
                                  std::move(staging->rows_),
                                  h.step_contributors, std::move(absent)});
      // On arrival, a set whose sum holds another worker's chunks waits
      // for the coordinator (which forms the step again). ApplyStepLocked
      // checks the sum again under its lock: a chunk may come in between.
      if (!h.step_contributors.empty() &&
          ledger_.StepComplete(h.step_contributors) &&
          arrival_.SummedExactly(h.step_contributors)) {
        RETURN_IF_ERROR(ApplyStepLocked(h.step_contributors, ready));
        counters_.CountFinalizedOnPush();
      }
    } else {
      const int64_t staleness = slice_.version() - h.base_version;
      if (sparse_ != nullptr && !staging->rows_.empty()) {
        const std::vector<SparseRows>* rows = &staging->rows_;
        if (absl::Status applied = sparse_->ApplyCheckedStep(
                absl::MakeConstSpan(&rows, 1),
                std::max(h.num_samples, config_.global_batch),
                slice_.version());
            !applied.ok()) {
          return RejectLocked(std::move(applied));
        }
      }
      RETURN_IF_ERROR(ApplyLocked(
          grad.data(), ready, AsyncLrScale(h.num_samples, config_.global_batch),
          absent));
      grads_.Recycle(std::move(grad));
      ledger_.RecordAsyncStep(h.worker_id, h.step);
      counters_.RecordStaleness(staleness);
    }
    counters_.CountAccepted();
    version = slice_.version();
  }
  StepTrace::Record(StepEvent::kPushCommitted, h.step, config_.shard_id);
  Metrics()
      .push_seconds(MetricRole::kPs)
      .Observe(SecondsSince(staging->begun_));
  for (auto& [callback, snapshot] : ready) callback(std::move(snapshot));
  return version;
}

absl::Status PsShard::ApplyLocked(const float* grad, ReadyList& ready,
                                  double lr_scale,
                                  absl::Span<const FlatRange> skip) {
  mu_.AssertHeld();
  RETURN_IF_ERROR(slice_.Apply(grad, lr_scale, skip));
  waiters_.TakeReady(slice_.version(), slice_.snapshot(), ready);
  return absl::OkStatus();
}

std::vector<float> PsShard::TakeGradBuffer() {
  {
    absl::MutexLock lock(&mu_);
    if (std::optional<std::vector<float>> buffer = grads_.TakeFree()) {
      return std::move(*buffer);
    }
  }
  return std::vector<float>(static_cast<size_t>(range_.size()));
}

absl::StatusOr<PullWaitId> PsShard::WaitForVersion(absl::string_view job_id,
                                                   int64_t min_version,
                                                   ReadyCallback ready,
                                                   int64_t generation) {
  absl::StatusOr<std::shared_ptr<const PsSnapshot>> snapshot;
  {
    absl::MutexLock lock(&mu_);
    if (job_id != config_.job_id) {
      return Rejected(
          "pull", absl::FailedPreconditionError(absl::StrFormat(
                      "pull for job '%s', this shard serves job '%s'", job_id,
                      config_.job_id)));
    }
    const int64_t version = slice_.version();
    if (waiters_.shut_down()) {
      snapshot = ShutDownError(config_.shard_id);
    } else if (version < min_version && generation > 0 &&
               generation < max_generation_) {
      return Rejected("pull",
                      absl::AbortedError(absl::StrFormat(
                          "pull of version %d under generation %d: shard %d is "
                          "at version %d and fenced at generation %d (the step "
                          "was aborted or rolled back): ask for a new task",
                          min_version, generation, config_.shard_id, version,
                          max_generation_)));
    } else if (version < min_version) {
      absl::StatusOr<PullWaitId> id = waiters_.Add(
          min_version, std::move(ready), config_.limits.max_pending_pulls);
      if (!id.ok()) return Rejected("pull", id.status());
      return id;
    } else {
      snapshot = slice_.snapshot();
    }
  }
  if (snapshot.ok()) Metrics().pull_seconds(MetricRole::kPs).Observe(0);
  ready(std::move(snapshot));
  return kNoPullWait;
}

bool PsShard::CancelWait(PullWaitId id) {
  absl::MutexLock lock(&mu_);
  return waiters_.Cancel(id);
}

void PsShard::Shutdown() {
  std::vector<ReadyCallback> callbacks;
  {
    absl::MutexLock lock(&mu_);
    waiters_.ShutDown(callbacks);
  }
  const absl::Status status = ShutDownError(config_.shard_id);
  for (ReadyCallback& callback : callbacks) callback(status);
}

void PsShard::RecordBytes(absl::string_view role, int64_t sent,
                          int64_t received) {
  Metrics().AddBytes(MetricRole::kPs, role, sent, received);
  bytes_.Add(role, sent, received);
}

std::shared_ptr<const PsSnapshot> PsShard::CurrentSnapshot() {
  absl::MutexLock lock(&mu_);
  return slice_.snapshot();
}

int64_t PsShard::version() const {
  absl::MutexLock lock(&mu_);
  return slice_.version();
}

PsShardInfo PsShard::Info() const {
  PsShardInfo info;
  info.job_id = config_.job_id;
  info.shard_id = config_.shard_id;
  info.num_shards = config_.num_shards;
  info.num_elements = range_.size();
  for (const Chunk& chunk : owned_) info.chunk_ids.push_back(chunk.id);
  {
    absl::MutexLock lock(&mu_);
    const PushCounts& counts = counters_.counts();
    info.version = slice_.version();
    info.accepted_pushes = counts.accepted;
    info.rejected_pushes = counts.rejected;
    info.max_generation = max_generation_;
    info.max_staleness = counts.max_staleness;
    info.sum_staleness = counts.sum_staleness;
    info.pending_pulls = waiters_.size();
    info.steps_finalized_on_push = counts.finalized_on_push;
    if (sparse_ != nullptr) info.sparse = sparse_->Stats();
  }
  bytes_.CopyTo(info.bytes_sent, info.bytes_received);
  return info;
}

}  // namespace ferry

#include "ps/ps_shard.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/peer_limits.h"
#include "common/prometheus_metrics.h"
#include "common/status_macros.h"
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

// Whether `owner` is the only reference to its snapshot. Readers get
// references only under the shard's mutex, so then none can until it is
// released. Copying the reference is an acquire read-modify-write of the
// count, which the readers' release of theirs (after their last read)
// happens before; a relaxed use_count() read alone orders nothing.
bool SoleOwner(const std::shared_ptr<PsSnapshot>& owner) {
  if (owner == nullptr || owner.use_count() != 1) return false;
  const std::shared_ptr<PsSnapshot> ordered = owner;
  return true;
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
                               config.max_chunk_elements));
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
  ASSIGN_OR_RETURN(Optimizer optimizer,
                   Optimizer::Create(config.optimizer, backend.get(),
                                     static_cast<size_t>(range.size()),
                                     static_cast<size_t>(trainable)));
  std::unique_ptr<SparseStore> sparse;
  if (config.sparse.has_value()) {
    config.sparse->shard_id = config.shard_id;
    config.sparse->num_shards = config.num_shards;
    ASSIGN_OR_RETURN(sparse, SparseStore::Create(*config.sparse));
  }
  std::vector<float> params = std::move(config.initial_slice);
  config.initial_slice.clear();  // the slice lives in params_ only
  auto shard = std::unique_ptr<PsShard>(
      new PsShard(std::move(config), range, std::move(chunks),
                  std::move(params), std::move(backend), std::move(optimizer)));
  shard->sparse_ = std::move(sparse);
  return shard;
}

PsShard::PsShard(PsShardConfig config, FlatRange range,
                 std::vector<Chunk> all_chunks, std::vector<float> params,
                 std::unique_ptr<ComputeBackend> backend, Optimizer optimizer)
    : config_(std::move(config)),
      all_chunks_(std::move(all_chunks)),
      range_(range),
      backend_(std::move(backend)),
      optimizer_(std::move(optimizer)),
      current_(std::make_shared<PsSnapshot>(
          PsSnapshot{.version = 0, .values = std::move(params)})) {
  for (const Chunk& chunk : all_chunks_) {
    if (chunk.shard == config_.shard_id) owned_.push_back(chunk);
  }
  first_owned_id_ = owned_.empty() ? 0 : owned_.front().id;
  arrival_enabled_ = config_.sum_on_arrival &&
                     config_.consistency == PsConsistency::kSync &&
                     !owned_.empty();
  if (arrival_enabled_) {
    absl::MutexLock lock(&sum_mu_);
    arrival_ =
        std::make_unique<ArrivalSum>(owned_, range_.begin, range_.size());
  }
}

absl::Status PsShard::RejectPush(absl::Status status) {
  absl::MutexLock lock(&mu_);
  ++rejected_pushes_;
  return Rejected("push", std::move(status));
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
  if (config_.consistency == PsConsistency::kSync) {
    if (h.step < version_ && AppliedPushLocked(h)) {
      // Finalized on push while the worker's pushes to other shards failed:
      // this shard has (and applied) exactly this push, so a retry counts
      // as accepted, as for a push still buffered.
      return absl::AlreadyExistsError(absl::StrFormat(
          "worker %s's push of step %d was applied here (version %d)",
          h.worker_id, h.step, version_));
    }
    if (h.step < version_) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "push from %s for step %d: step already applied (version %d)",
          h.worker_id, h.step, version_));
    }
    if (h.step > version_) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "push from %s for step %d: step not open yet (open step %d)",
          h.worker_id, h.step, version_));
    }
    if (pending_.contains(h.worker_id)) {
      return absl::AlreadyExistsError(absl::StrFormat(
          "worker %s already pushed step %d", h.worker_id, h.step));
    }
    const int64_t buffered = static_cast<int64_t>(pending_.size());
    if (buffered >= config_.limits.max_step_pushes) {
      return LimitExceeded(
          absl::StrFormat("the number of pushes buffered for step %d", h.step),
          buffered + 1, config_.limits.max_step_pushes);
    }
  } else {
    if (h.base_version > version_) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "push from %s: base_version %d is ahead of the shard's version %d",
          h.worker_id, h.base_version, version_));
    }
    auto it = last_step_.find(h.worker_id);
    if (it != last_step_.end() && h.step <= it->second) {
      return absl::AlreadyExistsError(absl::StrFormat(
          "worker %s already pushed step %d (last applied step %d)",
          h.worker_id, h.step, it->second));
    }
    const int64_t known = static_cast<int64_t>(last_step_.size());
    if (it == last_step_.end() && known >= config_.limits.max_async_workers) {
      return LimitExceeded("the number of async workers the shard remembers",
                           known + 1, config_.limits.max_async_workers);
    }
  }
  return absl::OkStatus();
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
    if (!status.ok()) {
      ++rejected_pushes_;
      return Rejected("push", std::move(status));
    }
    open_pushes_->fetch_add(1);
    staging->open_pushes_ = open_pushes_;
    staging->rollbacks_ = rollbacks_;
  }
  staging->begun_ = absl::Now();
  staging->header_ = header;
  // Every owned element is written by exactly one chunk before a commit, so
  // a recycled buffer needs no clearing. On arrival, chunks go to the sum.
  staging->on_arrival_ = SumsOnArrival();
  if (!staging->on_arrival_) staging->grad_ = TakeGradBuffer();
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
  if (config_.consistency == PsConsistency::kAsync) {
    const float n = static_cast<float>(h.num_samples);
    for (float& g : grad) g /= n;
  }
  ReadyList ready;
  int64_t version = 0;
  {
    absl::MutexLock lock(&mu_);
    absl::Status status = CheckHeaderLocked(h);
    if (status.ok() && staging->rollbacks_ != rollbacks_) {
      status = absl::AbortedError(absl::StrFormat(
          "push from %s: shard %d was rolled back to version %d while the "
          "push was received",
          h.worker_id, config_.shard_id, version_));
    }
    if (!status.ok()) {
      ++rejected_pushes_;
      return Rejected("push", std::move(status));
    }
    if (config_.consistency == PsConsistency::kSync) {
      pending_[h.worker_id] =
          Contribution{h.num_samples, std::move(grad),
                       std::move(staging->rows_), h.step_contributors};
      // On arrival, a set whose sum holds another worker's chunks waits
      // for the coordinator (which forms the step again). ApplyStepLocked
      // checks the sum again under its lock: a chunk may come in between.
      if (!h.step_contributors.empty() &&
          StepCompleteLocked(h.step_contributors) &&
          SumIsExactlyLocked(h.step_contributors)) {
        RETURN_IF_ERROR(ApplyStepLocked(h.step_contributors, ready));
        ++steps_finalized_on_push_;
      }
    } else {
      const int64_t staleness = version_ - h.base_version;
      if (sparse_ != nullptr && !staging->rows_.empty()) {
        const std::vector<SparseRows>* rows = &staging->rows_;
        if (absl::Status applied = sparse_->ApplyCheckedStep(
                absl::MakeConstSpan(&rows, 1), h.num_samples, version_);
            !applied.ok()) {
          ++rejected_pushes_;
          return Rejected("push", std::move(applied));
        }
      }
      RETURN_IF_ERROR(ApplyLocked(grad.data(), ready));
      RecycleGradBuffer(std::move(grad));
      last_step_[h.worker_id] = h.step;
      max_staleness_ = std::max(max_staleness_, staleness);
      sum_staleness_ += staleness;
      Metrics().staleness_steps().Set(static_cast<double>(staleness));
      Metrics().push_staleness_steps().Observe(static_cast<double>(staleness));
    }
    ++accepted_pushes_;
    version = version_;
  }
  Metrics()
      .push_seconds(MetricRole::kPs)
      .Observe(SecondsSince(staging->begun_));
  for (auto& [callback, snapshot] : ready) callback(std::move(snapshot));
  return version;
}

absl::Status PsShard::ApplyLocked(const float* grad, ReadyList& ready) {
  mu_.AssertHeld();
  std::vector<float>& params = WritableParamsLocked(/*keep_values=*/true);
  absl::Status status = optimizer_.Apply(grad, params.data());
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrFormat("optimizer update of shard %d failed: %s",
                        config_.shard_id, status.ToString()));
  }
  current_->version = ++version_;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->second.min_version <= version_) {
      ready.emplace_back(std::move(it->second.ready), SnapshotLocked());
      waiters_.erase(it++);
    } else {
      ++it;
    }
  }
  return absl::OkStatus();
}

std::vector<float> PsShard::TakeGradBuffer() {
  {
    absl::MutexLock lock(&mu_);
    if (!free_grads_.empty()) {
      std::vector<float> buffer = std::move(free_grads_.back());
      free_grads_.pop_back();
      return buffer;
    }
  }
  return std::vector<float>(static_cast<size_t>(range_.size()));
}

void PsShard::RecycleGradBuffer(std::vector<float> buffer) {
  // Enough for every contributor of a step plus pushes in flight.
  constexpr size_t kMaxFree = 8;
  if (free_grads_.size() < kMaxFree &&
      buffer.size() == static_cast<size_t>(range_.size())) {
    free_grads_.push_back(std::move(buffer));
  }
}

std::vector<float>& PsShard::WritableParamsLocked(bool keep_values) {
  mu_.AssertHeld();
  if (SoleOwner(current_)) return current_->values;
  std::shared_ptr<PsSnapshot> next;
  if (SoleOwner(spare_snapshot_)) {
    next = std::move(spare_snapshot_);
  } else {
    next = std::make_shared<PsSnapshot>();
  }
  if (keep_values) {
    next->values.assign(current_->values.begin(), current_->values.end());
  } else {
    next->values.resize(current_->values.size());
  }
  next->version = current_->version;
  // The readers' version: its memory serves the next copy once they are
  // done with it.
  spare_snapshot_ = std::exchange(current_, std::move(next));
  return current_->values;
}

std::shared_ptr<const PsSnapshot> PsShard::SnapshotLocked() {
  mu_.AssertHeld();
  return current_;
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
    if (shut_down_) {
      snapshot = ShutDownError(config_.shard_id);
    } else if (version_ < min_version && generation > 0 &&
               generation < max_generation_) {
      return Rejected("pull",
                      absl::AbortedError(absl::StrFormat(
                          "pull of version %d under generation %d: shard %d is "
                          "at version %d and fenced at generation %d (the step "
                          "was aborted or rolled back): ask for a new task",
                          min_version, generation, config_.shard_id, version_,
                          max_generation_)));
    } else if (version_ < min_version) {
      const int64_t pending = static_cast<int64_t>(waiters_.size());
      if (pending >= config_.limits.max_pending_pulls) {
        return Rejected(
            "pull", LimitExceeded("the number of pending pulls", pending + 1,
                                  config_.limits.max_pending_pulls));
      }
      const PullWaitId id = next_wait_id_++;
      // ferry_pull_seconds: how long the pull waited for its version.
      ReadyCallback timed =
          [begun = absl::Now(), ready = std::move(ready)](
              absl::StatusOr<std::shared_ptr<const PsSnapshot>> s) {
            if (s.ok())
              Metrics()
                  .pull_seconds(MetricRole::kPs)
                  .Observe(SecondsSince(begun));
            ready(std::move(s));
          };
      waiters_.emplace(id, Waiter{min_version, std::move(timed)});
      return id;
    } else {
      snapshot = SnapshotLocked();
    }
  }
  if (snapshot.ok()) Metrics().pull_seconds(MetricRole::kPs).Observe(0);
  ready(std::move(snapshot));
  return kNoPullWait;
}

bool PsShard::CancelWait(PullWaitId id) {
  absl::MutexLock lock(&mu_);
  return waiters_.erase(id) > 0;
}

void PsShard::Shutdown() {
  std::vector<ReadyCallback> callbacks;
  {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
    for (auto& [id, waiter] : waiters_) {
      callbacks.push_back(std::move(waiter.ready));
    }
    waiters_.clear();
  }
  const absl::Status status = ShutDownError(config_.shard_id);
  for (ReadyCallback& callback : callbacks) callback(status);
}

void PsShard::RecordBytes(absl::string_view role, int64_t sent,
                          int64_t received) {
  Metrics().AddBytes(MetricRole::kPs, role, sent, received);
  absl::MutexLock lock(&bytes_mu_);
  const std::string key(role);
  if (sent != 0) bytes_sent_[key] += sent;
  if (received != 0) bytes_received_[key] += received;
}

std::shared_ptr<const PsSnapshot> PsShard::CurrentSnapshot() {
  absl::MutexLock lock(&mu_);
  return SnapshotLocked();
}

int64_t PsShard::version() const {
  absl::MutexLock lock(&mu_);
  return version_;
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
    info.version = version_;
    info.accepted_pushes = accepted_pushes_;
    info.rejected_pushes = rejected_pushes_;
    info.max_generation = max_generation_;
    info.max_staleness = max_staleness_;
    info.sum_staleness = sum_staleness_;
    info.pending_pulls = static_cast<int64_t>(waiters_.size());
    info.steps_finalized_on_push = steps_finalized_on_push_;
    if (sparse_ != nullptr) info.sparse = sparse_->Stats();
  }
  absl::MutexLock lock(&bytes_mu_);
  info.bytes_sent = bytes_sent_;
  info.bytes_received = bytes_received_;
  return info;
}

}  // namespace ferry

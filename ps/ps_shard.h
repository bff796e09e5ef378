// PsShard: the core of one parameter-server shard, without gRPC types. It owns
// the chunks that PlaceChunks() assigns to its shard id (one contiguous flat
// range of the model, the "slice"), receives gradient pushes, applies the
// optimizer to the slice and answers waits for a version.
//
// Versions: version() counts the optimizer updates applied; it starts at 0.
//
// Pushes carry the SUM of per-sample gradients of `num_samples` samples and
// are all-or-nothing: BeginPush() opens a private staging buffer for
// (worker, step), AddChunk() copies one chunk into it, CommitPush() checks that
// every owned chunk arrived exactly once and hands the gradient to the shard.
// A rejected push (any error from the three calls) changes nothing but the
// rejected_pushes counter.
//
// Consistency:
//  - kSync: step s is open while version() == s. Every committed push for the
//    open step is kept in its own buffer (one per worker; nothing is summed on
//    arrival). FinalizeStep(s, contributors) averages exactly the contributors'
//    buffers (sum of their gradients / sum of their num_samples), applies one
//    update, discards every other buffer of the step and makes version s+1.
//    Finalize on push: a push may name the step's whole contributor set
//    (step_contributors, as the coordinator formed it). Once every worker of
//    that set has a committed push for the open step that names the same
//    set, the commit of the last one applies the step over exactly that set
//    (as FinalizeStep would, in the set's order) without waiting for the
//    coordinator. The set each recent step was applied over is remembered:
//    a later FinalizeStep of that step over the same set is the idempotent
//    success it always was, over another set ALREADY_EXISTS (the step must be
//    undone by a restore: the coordinator decided otherwise, e.g. it dropped
//    a worker that died after its pushes).
//  - kAsync (also used for SSP; the staleness bound is enforced by the
//    coordinator): each committed push is applied on arrival as
//    sum / num_samples, with the learning rate times num_samples /
//    global_batch (config.global_batch; the linear scaling rule, so that an
//    epoch moves the weights as far as in sync mode); staleness = version -
//    base_version is recorded.
//
// Embedding tables (config.sparse): a push may carry row gradients besides
// its chunks (AddRows), kept with its dense buffer; a sync step applies the
// contributors' rows (SparseStore::ApplyStep: their mean, one update per
// touched row) with the dense update, an async push on arrival (each row's
// sum divided by the global batch, as a sync step whose only contributor
// to that row is this push would divide it). ReadRows
// serves pulls of rows; ExportState and RestoreState include the rows.
//
// Generation fencing: the shard remembers the highest generation named by a
// successful FinalizeStep(), a restore or RaiseFence(); pushes and finalizes
// with an older generation are ABORTED.
//
// Waits: WaitForVersion() registers a callback that runs (outside the lock, on
// the thread that makes the version available, or inline) with an immutable
// snapshot of the slice; no thread waits.
//
// Memory: the slice is held once, copied on write only while a reader
// holds the previous version (ShardSlice). A sync step sums its
// contributors into the first one's buffer (no separate scratch). So a
// sync shard holds its slice, the optimizer state and one buffer per
// pushing worker (docs/benchmarks.md, "Memory of a shard").
//
// Checkpoints and rollback: ExportState() copies the version, the slice and
// the optimizer state consistently (VisitState() reads them in place, for a
// checkpoint written without a copy of the rows); RestoreState() replaces
// them, and RollBackOpenStep() keeps them. Both drop the open step's pushes
// (also those still being received), end every pending wait with ABORTED
// and fence older generations. StopUpdates() freezes the state for a final
// checkpoint at shutdown.
//
// Parts: ShardSlice (the slice, the optimizer and the version; export and
// restore), PushLedger (the open step's pushes and the steps applied),
// OpenStepSum (the sum on arrival, its own lock), PullWaiters,
// GradBufferPool, PushCounters and PeerBytes, and SparseStore (the
// embedding tables). PsShard checks each call against them and the fence
// under one mutex and calls the waits back outside it.
//
// Metrics (role "ps"): ferry_rejected_inputs_total{op} (pushes, finalizes,
// pulls), ferry_push_seconds (BeginPush to commit), ferry_staleness_steps
// (async), ferry_pull_seconds, ferry_bytes_total (RecordBytes).
//
// Thread safety: every method may be called concurrently from any thread. A
// PsPushStaging is used by one thread at a time.
#ifndef FERRY_PS_PS_SHARD_H_
#define FERRY_PS_PS_SHARD_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/byte_sink.h"
#include "common/gradient_codec.h"
#include "common/optimizer_config.h"
#include "common/peer_limits.h"
#include "common/sharding.h"
#include "compute/compute_backend.h"
#include "compute/optimizer.h"
#include "ps/arrival_sum.h"
#include "ps/grad_buffer_pool.h"
#include "ps/open_step_sum.h"
#include "ps/pull_waiters.h"
#include "ps/push_ledger.h"
#include "ps/shard_counters.h"
#include "ps/shard_slice.h"
#include "ps/shard_state.h"
#include "ps/sparse_store.h"
#include "ps/step_contributors.h"

namespace ferry {

enum class PsConsistency { kSync, kAsync };

struct PsShardConfig {
  std::string job_id;
  int32_t shard_id = 0;
  int32_t num_shards = 1;
  std::vector<int64_t> tensor_sizes;  // model order, elements per tensor
  // The last state_elements of the model's flat buffer are non-trainable
  // state (model/model_params.h ModelJobLayout): a step adds the
  // contributors' mean "gradient" (their mean change of the state) to them
  // instead of running the optimizer.
  int64_t state_elements = 0;
  int64_t max_chunk_elements = kDefaultMaxChunkElements;
  // Where chunks are cut (every process of the job places them alike).
  ChunkCuts chunk_cuts;
  OptimizerConfig optimizer;
  PsConsistency consistency = PsConsistency::kSync;
  // The job's global batch. Async: a push of n samples is applied with the
  // learning rate times n / global_batch; 0 applies every push with the
  // full rate.
  int64_t global_batch = 0;
  // Sync: sum pushed chunks into one buffer as they arrive instead of one
  // buffer per contributor (ps/arrival_sum.h: a step then applies exactly
  // the workers it summed; the sum follows arrival order).
  bool sum_on_arrival = false;
  // What peers may make the shard hold (common/peer_limits.h).
  PsLimits limits;
  // Exactly the shard's range ShardRange(total, num_shards, shard_id) of the
  // full initial flat parameters.
  std::vector<float> initial_slice;
  // Embedding tables (ps/sparse_store.h): set for models with them. Its
  // shard_id and num_shards are the shard's own (Create sets them).
  std::optional<SparseStoreConfig> sparse;
};

// Mirrors ferry.v1.PushHeader.
struct PsPushHeader {
  std::string job_id;
  std::string worker_id;
  int64_t generation = 0;
  int64_t step = 0;          // sync: the step pushed for; async: worker clock
  int64_t num_samples = 0;   // >= 1
  int64_t base_version = 0;  // version the gradient was computed on
  // Sync: the step's whole contributor set (finalize on push), or empty
  // (the coordinator's FinalizeStep closes the step).
  std::vector<PsContributor> step_contributors;
};

struct PsShardInfo {
  std::string job_id;
  int32_t shard_id = 0;
  int32_t num_shards = 0;
  int64_t version = 0;
  int64_t num_elements = 0;
  std::vector<int32_t> chunk_ids;
  int64_t accepted_pushes = 0;
  int64_t rejected_pushes = 0;
  int64_t max_generation = 0;
  int64_t max_staleness = 0;  // async only
  int64_t sum_staleness = 0;  // async only; mean = sum / accepted_pushes
  int64_t pending_pulls = 0;
  int64_t steps_finalized_on_push = 0;     // sync: applied without FinalizeStep
  std::optional<SparseStoreStats> sparse;  // jobs with embedding tables
  std::map<std::string, int64_t> bytes_sent;      // by peer role
  std::map<std::string, int64_t> bytes_received;  // by peer role
};

// A push being received; created by PsShard::BeginPush. Opaque to callers.
class PsPushStaging {
 public:
  ~PsPushStaging() {
    if (open_pushes_ != nullptr) open_pushes_->fetch_sub(1);
  }
  const PsPushHeader& header() const { return header_; }

 private:
  friend class PsShard;
  // The shard's count of open pushes, released with the staging.
  std::shared_ptr<std::atomic<int64_t>> open_pushes_;
  PsPushHeader header_;
  std::vector<float> grad_;  // the shard's slice (empty on arrival)
  bool on_arrival_ = false;  // chunks go to the shard's ArrivalSum
  // Async (never summed on arrival): each chunk lands divided by the
  // push's samples, while it is in cache; 0 in sync.
  float divide_by_ = 0.0f;
  std::vector<float> scratch_;    // on arrival: a decoded chunk
  std::vector<bool> seen_;        // by owned chunk index
  std::vector<SparseRows> rows_;  // embedding rows, one part per table
  // The slice's elements the push leaves out (PushRequest.absent), slice
  // offsets, in the order the chunks came.
  std::vector<FlatRange> absent_;
  int64_t chunks_seen_ = 0;
  absl::Status error_;      // first error; once set, the push is rejected
  uint64_t rollbacks_ = 0;  // the shard's rollback count at BeginPush
  absl::Time begun_;        // BeginPush, for ferry_push_seconds
};

class PsShard {
 public:
  // How many applied steps' contributor sets are remembered.
  static constexpr int64_t kRememberedSteps = PushLedger::kRememberedSteps;

  // Called with the snapshot (never null) of the first version >= the one
  // waited for; or with UNAVAILABLE when the shard shuts its waits down
  // (Shutdown()), ABORTED when it is rolled back (RestoreState(),
  // RollBackOpenStep()).
  using ReadyCallback = PullWaiters::ReadyCallback;

  // INVALID_ARGUMENT for an invalid config: empty job_id, shard_id outside
  // [0, num_shards), bad tensor sizes / chunk size, invalid optimizer, or an
  // initial_slice whose size is not the shard's range or holds non-finite
  // values.
  static absl::StatusOr<std::unique_ptr<PsShard>> Create(PsShardConfig config);

  PsShard(const PsShard&) = delete;
  PsShard& operator=(const PsShard&) = delete;

  // Opens a push. Errors (each counted in rejected_pushes):
  //  INVALID_ARGUMENT    empty worker_id, num_samples < 0 (async: < 1),
  //                      base_version < 0;
  //                      step_contributors in async mode, or not a valid
  //                      set (CheckStepContributors) naming the pusher with
  //                      its num_samples;
  //  FAILED_PRECONDITION wrong job_id; sync: step != version() (below:
  //                      already applied, above: not open yet); async:
  //                      base_version > version();
  //  ALREADY_EXISTS      sync: the worker already committed a push for this
  //                      step, or the step was applied with this worker's
  //                      push (same samples) among the last
  //                      kRememberedSteps steps; async: step <= the
  //                      worker's last applied step;
  //  ABORTED             header generation older than the newest generation
  //                      named by FinalizeStep or a restore;
  //  RESOURCE_EXHAUSTED  job_id or worker_id longer than kMaxIdBytes;
  //                      limits.max_open_pushes stagings alive; sync:
  //                      limits.max_step_pushes workers already pushed the
  //                      open step; async: a new worker when
  //                      limits.max_async_workers are remembered;
  //  UNAVAILABLE         after StopUpdates().
  // The staging counts as an open push until it is destroyed.
  absl::StatusOr<std::unique_ptr<PsPushStaging>> BeginPush(
      const PsPushHeader& header);

  // Copies one chunk of `num_bytes` bytes (little-endian fp32) into
  // `staging`; an async push's chunk lands divided by the push's samples
  // (the values its commit applies), after its checks saw the values as
  // pushed. INVALID_ARGUMENT naming the chunk for an unknown id, a chunk owned
  // by another shard, a chunk already added, a byte length other than 4 *
  // chunk.length, or a non-finite value. After an error the staging is rejected
  // for good (counted once). Takes no lock.
  absl::Status AddChunk(PsPushStaging& staging, int32_t chunk_id,
                        const void* data, size_t num_bytes);
  // The same for a chunk in `encoding` (common/gradient_codec.h), decoded
  // into the staging's fp32 buffer, so aggregation and the optimizer see
  // fp32. Also INVALID_ARGUMENT naming the chunk for an unknown encoding or
  // data that is not a valid encoding of chunk.length elements (wrong
  // size, top-k index out of range or not increasing).
  absl::Status AddChunk(PsPushStaging& staging, int32_t chunk_id,
                        GradientEncoding encoding, const void* data,
                        size_t num_bytes);
  // The same for a chunk whose bytes lie in `pieces`, back to back (a
  // received message's slices: copied once into the push's buffer, or
  // read in place when in one piece). `absent`: the chunk's elements that
  // the push leaves out (PushRequest.absent: (begin, end) pairs of chunk
  // offsets), which the step's optimizer skips when every contributor left
  // them out; also INVALID_ARGUMENT when they are not a sorted, disjoint
  // set of ranges inside the chunk, reach the model's non-trainable state,
  // or hold a value other than 0.
  absl::Status AddChunk(PsPushStaging& staging, int32_t chunk_id,
                        GradientEncoding encoding,
                        absl::Span<const absl::string_view> pieces,
                        absl::Span<const int64_t> absent = {});
  absl::Status AddChunk(PsPushStaging& staging, int32_t chunk_id,
                        absl::Span<const float> values) {
    return AddChunk(staging, chunk_id, values.data(),
                    values.size() * sizeof(float));
  }

  // Adds one table's row gradients (sums over the push's samples, as the
  // chunks) to `staging`. INVALID_ARGUMENT naming the table (and id) for a
  // job without embedding tables, an unknown table, a table already added to
  // this push, or what SparseStore::CheckRows refuses (an id placed on
  // another shard or repeated, a wrong size, a non-finite value). After an
  // error the staging is rejected for good. Takes no lock.
  absl::Status AddRows(PsPushStaging& staging, SparseRows rows);

  // Reads rows of the embedding tables into `out` (one vector per part of
  // `tables`, ids.size() x dim floats) and returns the version they are
  // of. Unseen ids read as their initial values or zeros (see SparseTable).
  // FAILED_PRECONDITION for a wrong job_id or a job without embedding
  // tables; INVALID_ARGUMENT naming the table for an unknown table or an
  // id placed on another shard. Callers wait for a version first
  // (WaitForVersion) to read the rows a step needs.
  struct RowsToRead {
    int32_t table = 0;
    absl::Span<const uint64_t> ids;
  };
  absl::StatusOr<int64_t> ReadRows(absl::string_view job_id,
                                   absl::Span<const RowsToRead> tables,
                                   std::vector<std::vector<float>>& out);

  // Commits a push. Returns the version after the push was accepted (sync: the
  // current version, the step is applied later, or the version after it when
  // this push completed its step_contributors; async: the version that
  // includes this push). Errors: the staging's error, INVALID_ARGUMENT naming
  // the first owned chunk missing, any BeginPush error re-checked against
  // the state at commit time, or ABORTED when the shard was rolled back since
  // BeginPush. On error nothing changes but rejected_pushes.
  absl::StatusOr<int64_t> CommitPush(std::unique_ptr<PsPushStaging> staging);

  // Counts a push that the caller refused before it reached the shard (e.g. a
  // stream without a header) in rejected_pushes; returns `status`.
  absl::Status RejectPush(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);

  // Sync mode: applies step `step` over exactly `contributors` and returns the
  // version after it. Idempotent: for an already applied step (step <
  // version()) returns OK with the current version and changes nothing.
  // Errors (nothing changes):
  //  FAILED_PRECONDITION wrong job_id, async mode, step > version() (the
  //                      message names the shard's version: it may have
  //                      restarted or been rolled back), or a contributor
  //                      that has not pushed this step here, or (sum on
  //                      arrival) a sum of other workers than the set's;
  //  INVALID_ARGUMENT    not a valid set (CheckStepContributors), or a
  //                      num_samples different from the one it pushed;
  //  RESOURCE_EXHAUSTED  more than limits.max_step_pushes contributors;
  //  ABORTED             generation older than one already finalized or
  //                      restored;
  //  UNAVAILABLE         after StopUpdates();
  //  INTERNAL            the optimizer failed (the step's pushes are
  //                      dropped then: they were summed in place).
  absl::StatusOr<int64_t> FinalizeStep(
      absl::string_view job_id, int64_t step,
      absl::Span<const PsContributor> contributors, int64_t generation);

  // Calls `ready` with a snapshot once version() >= min_version: inline
  // (before returning kNoPullWait) when it already is, else later on the
  // thread that applies that version. Returns an id for CancelWait.
  // FAILED_PRECONDITION for a wrong job_id, RESOURCE_EXHAUSTED when
  // limits.max_pending_pulls waits are pending (`ready` is never called then).
  // `generation` (> 0: the puller's lease's) fences waits: ABORTED at once,
  // instead of a wait, when the version is not there yet and `generation`
  // is older than the shard's fence (the lease was aborted or rolled back:
  // its push would be refused, and the version it waits for may need that
  // very push). 0: unfenced (evaluations, tools).
  absl::StatusOr<PullWaitId> WaitForVersion(absl::string_view job_id,
                                            int64_t min_version,
                                            ReadyCallback ready,
                                            int64_t generation = 0);
  // Forgets a wait. Returns true when `ready` will never be called; false when
  // it has been or is being called (possibly right now on another thread).
  bool CancelWait(PullWaitId id);

  // Calls every pending wait's callback with UNAVAILABLE, and makes later
  // WaitForVersion calls do the same at once, so that a server can drain its
  // calls. Pushes and finalizes keep working.
  void Shutdown();

  // A copy of the state, taken under the lock (consistent). With
  // `expected_version` >= 0: FAILED_PRECONDITION naming the shard's version
  // unless it is exactly that one. INTERNAL when the optimizer state cannot
  // be copied off the backend.
  absl::StatusOr<PsShardState> ExportState(int64_t expected_version = -1);

  // Exports the state (as ExportState(-1)) and, atomically with it, stops
  // every later update: pushes, finalizes and restores answer UNAVAILABLE
  // "shutting down"; pulls of the frozen version still work. For the last
  // checkpoint before a process exits. Irreversible.
  absl::StatusOr<PsShardState> StopUpdates();

  // ExportState and StopUpdates without the copy of the rows: calls
  // `visit` once with the state read in place, under the shard's lock, and
  // returns what it returns. Until it returns no update, restore, push
  // commit, row read or version wait runs on the shard (a checkpoint writer
  // writes the rows into the page cache meanwhile), so it sees one
  // consistent version. `visit` must not call the shard. Errors before the
  // visit: as ExportState's (VisitState); none for StopUpdatesAndVisit,
  // which stops updates even when `visit` fails.
  using StateVisitor = std::function<absl::Status(const PsShardStateView&)>;
  absl::Status VisitState(int64_t expected_version, const StateVisitor& visit);
  absl::Status StopUpdatesAndVisit(const StateVisitor& visit);

  // Replaces the version, the slice and the optimizer state with `state`,
  // then drops the open step's pushes (sync) and every push still being
  // received (their CommitPush answers ABORTED), forgets the workers' last
  // async steps, ends every pending wait with ABORTED "shard S rolled back
  // to version V", and raises the fence to max(fence, generation). Nothing
  // changes on error:
  //  FAILED_PRECONDITION params or optimizer buffers not of this shard's
  //                      slice size, or another number of optimizer buffers,
  //                      or other embedding tables (a checkpoint of another
  //                      job configuration);
  //  INVALID_ARGUMENT    negative version or steps, non-finite values;
  //  UNAVAILABLE         after StopUpdates().
  absl::Status RestoreState(const PsShardState& state, int64_t generation);
  // The same with the embedding tables read in place (a mapped checkpoint
  // file: SparseStore::Restore's views) instead of state.tables, which
  // must be empty (INVALID_ARGUMENT otherwise); `done` (optional) is told
  // of the tables' bytes as they are read. While the new tables are built
  // the shard holds the old ones too.
  absl::Status RestoreState(const PsShardState& dense,
                            absl::Span<const TableCheckpointView> tables,
                            int64_t generation, const BytesDone& done);

  // Raises the fence to max(fence, generation) and returns it; keeps every
  // push already held (also those being received: their commit is checked
  // against the new fence). Allowed after StopUpdates() (it changes no
  // state a checkpoint holds). FAILED_PRECONDITION for a wrong job_id,
  // INVALID_ARGUMENT for a negative generation.
  absl::StatusOr<int64_t> RaiseFence(absl::string_view job_id,
                                     int64_t generation);

  // As RestoreState() with the current state: keeps the version, the slice
  // and the optimizer state and drops / aborts / fences as above.
  // FAILED_PRECONDITION naming the shard's version when it is not `version`;
  // UNAVAILABLE after StopUpdates().
  absl::Status RollBackOpenStep(int64_t version, int64_t generation);

  // Before the shard's first update or restore: fills its embedding tables
  // with `fill` (a job starting from an export: ps/tables_file.h
  // RestoreTablesFile with TableScope::kPlacedHere), under the shard's
  // lock. FAILED_PRECONDITION for a shard without tables or past version
  // 0; `fill`'s errors otherwise (it must leave the store as it was).
  absl::Status FillTables(
      const std::function<absl::Status(SparseStore&)>& fill);

  // For an export: writes the tables to `sink` as one checkpoint table
  // section with counters, under the shard's lock, and returns the version
  // they are of. FAILED_PRECONDITION for a wrong job_id, no tables, or a
  // version below `min_version`; the sink's errors.
  absl::StatusOr<int64_t> WriteTablesSection(absl::string_view job_id,
                                             int64_t min_version,
                                             ByteSink& sink);

  // Adds bytes exchanged with a peer of `role` ("worker", "coordinator").
  void RecordBytes(absl::string_view role, int64_t sent, int64_t received);

  std::shared_ptr<const PsSnapshot> CurrentSnapshot();
  int64_t version() const;
  PsShardInfo Info() const;

  // The config, without initial_slice (the slice lives in the shard).
  const PsShardConfig& config() const { return config_; }
  FlatRange range() const { return range_; }
  // The chunks this shard owns, in flat order (ids are consecutive).
  const std::vector<Chunk>& owned_chunks() const { return owned_; }

 private:
  using ReadyList = PullWaiters::ReadyList;

  PsShard(PsShardConfig config, FlatRange range, std::vector<Chunk> all_chunks,
          std::vector<Chunk> owned, std::vector<float> params,
          std::unique_ptr<ComputeBackend> backend, Optimizer optimizer);

  absl::Status CheckHeaderLocked(const PsPushHeader& header) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The chunk `chunk_id` names, if this push may add it (INVALID_ARGUMENT
  // naming it otherwise: FailPush).
  absl::StatusOr<const Chunk*> StagedChunk(PsPushStaging& staging,
                                           int32_t chunk_id);
  // Rejects the push for good with `status` (counted once); returns it.
  absl::Status FailPush(PsPushStaging& staging, absl::Status status);
  // AddChunk's check of a chunk's absent ranges (`values`: its floats);
  // adds them to the staging.
  absl::Status AddAbsent(PsPushStaging& staging, const Chunk& chunk,
                         const float* values, absl::Span<const int64_t> absent);
  // Applies `grad` (already averaged) to the slice, its learning rates
  // times `lr_scale`, and bumps the version; moves the waits that become
  // ready into `ready`. `skip`: slice elements no contributor's gradient
  // holds (left alone with their optimizer state).
  absl::Status ApplyLocked(const float* grad, ReadyList& ready,
                           double lr_scale = 1.0,
                           absl::Span<const FlatRange> skip = {})
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sync: applies the open step over `contributors` (each has a held
  // push): sums them in that order, divides by their samples, applies,
  // drops every push of the step and remembers the set. On arrival:
  // FAILED_PRECONDITION (nothing changes) unless the sum is exactly theirs.
  absl::Status ApplyStepLocked(absl::Span<const PsContributor> contributors,
                               ReadyList& ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ApplyStepLocked once the sum's contributors are checked: `arrival` is
  // the step's sum on arrival (its lock held), or null for the held
  // pushes' buffers.
  absl::Status ApplySumLocked(absl::Span<const PsContributor> contributors,
                              ArrivalSum* arrival, ReadyList& ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<PsShardState> ExportLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status VisitLocked(const StateVisitor& visit)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The rollback common to RestoreState and RollBackOpenStep (after the
  // state, if any, was replaced); moves the waits into `aborted`.
  void RollBackLocked(int64_t generation, std::vector<ReadyCallback>& aborted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status StoppedError() const;
  // Both RestoreStates: `state`'s dense part and `tables`.
  absl::Status RestoreFrom(const PsShardState& state,
                           absl::Span<const TableCheckpointView> tables,
                           int64_t generation, const BytesDone& done)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A gradient buffer of the slice's size: recycled (contents unspecified)
  // or new (zeroed).
  std::vector<float> TakeGradBuffer() ABSL_LOCKS_EXCLUDED(mu_);
  // Counts a rejected push and returns `status` as the metric records it.
  absl::Status RejectLocked(absl::Status status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Immutable after construction.
  const PsShardConfig config_;
  const std::vector<Chunk> all_chunks_;
  const FlatRange range_;
  const std::vector<Chunk> owned_;
  const int32_t first_owned_id_;

  mutable absl::Mutex mu_;
  // The dense slice, its optimizer and the version.
  ShardSlice slice_ ABSL_GUARDED_BY(mu_);
  // The pushes held for the open step and those applied (exactly once).
  PushLedger ledger_ ABSL_GUARDED_BY(mu_);
  GradBufferPool grads_ ABSL_GUARDED_BY(mu_);
  PullWaiters waiters_ ABSL_GUARDED_BY(mu_);
  PushCounters counters_ ABSL_GUARDED_BY(mu_);
  int64_t max_generation_ ABSL_GUARDED_BY(mu_) = 0;
  // Rollbacks so far: a push begun before the last one can no longer
  // commit (PsPushStaging::rollbacks_).
  uint64_t rollbacks_ ABSL_GUARDED_BY(mu_) = 0;
  bool updates_stopped_ ABSL_GUARDED_BY(mu_) = false;
  // Embedding tables; null for a job without them. CheckRows and config()
  // read only immutable data and may be called without mu_.
  std::unique_ptr<SparseStore> sparse_;
  // Sync with sum_on_arrival and dense chunks here: the open step's sum
  // (its own lock, taken after mu_; AddChunk takes it alone).
  OpenStepSum arrival_;
  // Stagings alive; incremented under mu_, decremented by ~PsPushStaging.
  const std::shared_ptr<std::atomic<int64_t>> open_pushes_ =
      std::make_shared<std::atomic<int64_t>>(0);
  PeerBytes bytes_;  // its own lock
};

}  // namespace ferry

#endif  // FERRY_PS_PS_SHARD_H_

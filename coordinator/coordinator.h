// Coordinator core: the single source of truth of one job. No gRPC types;
// the gRPC adapter (coordinator_service.h) translates calls.
//
// Responsibilities:
//  - membership: Register / Heartbeat / Leave, eviction after
//    `heartbeat_timeout` without a heartbeat; every change bumps the
//    generation.
//  - the epoch's data-task queue (EpochTaskQueue) and exactly-once
//    accounting: a task is applied when its gradient was applied on every
//    shard, released back to the queue otherwise.
//  - sync mode: forms each step (contributors = the active members, in join
//    order; step s takes the global batch from the queue and splits it over
//    them in rank order, so with fixed membership step s covers permutation
//    positions [s*B, (s+1)*B) exactly as a single process would), and
//    finalizes it on the shards (ShardControl::FinalizeStep) once every
//    contributor (or `sync_quorum` of them) reported its push. A contributor
//    that leaves or dies before pushing is dropped from the step and its
//    samples go back to the queue.
//    Step s+1 forms once step s is finalizing; a prefetching worker
//    (NextTaskRequest.after_step) lets step s+1 form while step s still
//    runs, so its next lease is ready when it finishes (pipeline depth 2).
//  - async / ssp:K: leases tasks of global_batch / members samples on
//    demand; ssp holds back a worker more than K tasks ahead of the slowest.
//  - ring mode (always sync): every member is in every step (a member
//    with no samples contributes zeros) so that the step's ring is the
//    membership; the TRAIN response names the ring, the rank and the
//    ring's generation; a step whose ring lost a member gets a new ring
//    generation. FINISH waits for the final evaluation, which needs the
//    members' weights.
//  - evaluation of the shards' weights on the test set after every epoch,
//    and the job's end (after the last epoch, or max_steps).
//  - elasticity (docs/elasticity.md): a ring step that loses a member or
//    whose collective failed is aborted with every later open step: all
//    their tasks go back to the queue, and the step is formed again under a
//    new generation and fence (HeartbeatResponse.fence tells the members
//    to give the old one up), starting from the state after exactly the
//    committed steps. PS sync: every shard is checkpointed at the same step
//    every `checkpoint_every` steps and at every epoch end (before the
//    next epoch starts); when a shard cannot finalize (it restarted), the
//    coordinator reads the shards' versions, restores every shard to a
//    version they all have, returns the tasks of the undone steps to the
//    queue (from a log of applied steps) and re-forms the steps.
//  - persistence (`state_dir`): the state is written atomically after every
//    change that matters (membership, step applied, epoch); the step being
//    finalized is written first as "in doubt". Create() resumes from it:
//    open steps are aborted, members get a heartbeat timeout to come back,
//    and the shards are reconciled as above before the next finalize.
//
// NextTask is asynchronous: the callback runs once, possibly on another
// thread, with TRAIN/FINISH as soon as possible or WAIT after
// `long_poll` without work. No thread blocks while waiting.
//
// Thread safety: all public methods are thread-safe.
#ifndef FERRY_COORDINATOR_COORDINATOR_H_
#define FERRY_COORDINATOR_COORDINATOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/file_system.h"
#include "common/peer_limits.h"
#include "common/throughput_window.h"
#include "common/training_metrics.h"
#include "coordinator/checkpoint_plan.h"
#include "coordinator/coordinator_persistence.h"
#include "coordinator/eval_schedule.h"
#include "coordinator/finalizer_action.h"
#include "coordinator/job_events.h"
#include "coordinator/job_progress.h"
#include "coordinator/membership.h"
#include "coordinator/metrics_lines.h"
#include "coordinator/parked_calls.h"
#include "coordinator/recovery_log.h"
#include "coordinator/recovery_state.h"
#include "coordinator/shard_control.h"
#include "coordinator/step_rules.h"
#include "coordinator/step_table.h"
#include "coordinator/task_queue.h"
#include "coordinator/worker_evals.h"
#include "ferry/v1/coordinator.pb.h"
#include "ferry/v1/coordinator_state.pb.h"
#include "ferry/v1/ps.pb.h"
#include "proto/job_convert.h"

namespace ferry {

struct CoordinatorOptions {
  v1::JobSpec job;
  int64_t epoch_size = 0;  // training samples per epoch
  absl::Duration heartbeat_interval = absl::Seconds(1);
  absl::Duration heartbeat_timeout = absl::Seconds(5);
  absl::Duration long_poll = absl::Seconds(1);
  int min_workers = 1;
  int max_workers = kDefaultMaxWorkers;  // 0: no limit
  // The first step waits until this many workers have registered (a job
  // that should start with all its workers); later only min_workers counts.
  int start_workers = 0;
  // PS: checkpoint every shard every N applied steps (sync) or tasks
  // (async), and at every epoch end (sync). 0: epoch ends only. Shards
  // without a checkpoint directory turn checkpoints off.
  int64_t checkpoint_every = 0;
  // PS sync without a quorum: TRAIN leases name the step's contributors so
  // that the shards apply a step on its last push (finalize on push); the
  // coordinator's FinalizeStep then only confirms it. Steps right after a
  // checkpoint's version are left to the coordinator.
  bool finalize_on_push = true;
  // Non-empty: persist the state here and resume from it, through
  // `file_system` (not owned; must outlive the coordinator; null means
  // PosixFileSystem()).
  std::string state_dir;
  FileSystem* file_system = PosixFileSystem();
  // The saved state is replaced (atomically, not durably) after every
  // change and made durable (fsync) at most this often, by options.clock,
  // from the reaper thread off the coordinator's lock; a shard checkpoint
  // recorded, a rollback and Shutdown are made durable at once. Zero:
  // every save is durable.
  absl::Duration state_sync_interval = absl::Seconds(1);
  // Optional (not owned; must outlive the coordinator): gets one
  // RecordStep per committed step (sync: per step, with the step's
  // aggregate; async: per applied task) and one RecordEval per test-set
  // evaluation, in order, from the coordinator's threads, never under its
  // lock (coordinator_metrics.cc).
  MetricsSink* metrics = nullptr;
  // Every time the coordinator reads (heartbeat deadlines, long-poll
  // deadlines, step and uptime figures, events) comes from this clock (not
  // owned; must outlive the coordinator; null means RealClock()). Waits of
  // the background threads are bounded in real time (the reaper looks every
  // 100 ms), so a FakeClock never hangs them: tests advance it and call
  // CheckTimeouts().
  Clock* clock = RealClock();
  // Real-time pause before a finalize or checkpoint is retried on shards
  // that were unreachable (restarting). Tests shorten it.
  absl::Duration shard_retry = absl::Milliseconds(200);
  // How long the next epoch may wait for its start's checkpoint (the
  // shards cannot write it: a full or read-only disk) before the status
  // error says the job is stuck and why (`ferry local` stops then). The
  // retries go on; the error clears once the checkpoint is written.
  absl::Duration checkpoint_wait_limit = absl::Minutes(5);
};

// What /metrics shows of a coordinator (server/server_metrics.h).
struct CoordinatorGauges {
  int64_t members = 0;
  int64_t generation = 0;
  int64_t steps_applied = 0;  // sync: the shards' version; async: tasks applied
  // Samples of every applied step since the job began (restarts included:
  // StatusResponse.samples_applied), and whether the job has finished.
  int64_t samples_applied = 0;
  bool finished = false;
  // The last successful write of the state to state_dir; nullopt without
  // state_dir or before the first write.
  std::optional<absl::Time> last_state_write;
  v1::ByteCounts own_bytes;  // CountBytes() so far, by peer role
  // The throughput window's figures (common/throughput_window.h).
  WindowFigures window;
};

// The scores of one evaluation as an EvalPoint (accuracy, loss, AUC and a
// ring member's embedding rows; step, epoch, final and seconds are the
// caller's).
v1::EvalPoint ToEvalPoint(const TestScores& scores);

class Coordinator {
 public:
  using NextTaskCallback = ParkedCalls::Callback;

  // `shards` must outlive the coordinator; they finalize, checkpoint,
  // restore and evaluate. Starts the background threads.
  // INVALID_ARGUMENT for an unusable job (batch, epochs, epoch size);
  // FAILED_PRECONDITION / DATA_LOSS for a state in `state_dir` that belongs
  // to another job or cannot be read.
  static absl::StatusOr<std::unique_ptr<Coordinator>> Create(
      CoordinatorOptions options, ShardControl* shards);
  // Ring mode: no shards; `evaluator` (must outlive the coordinator)
  // evaluates the members' weights. INVALID_ARGUMENT for a PS job, else as
  // above.
  static absl::StatusOr<std::unique_ptr<Coordinator>> Create(
      CoordinatorOptions options, WeightsEvaluator* evaluator);
  // Stops the background threads and answers parked NextTask calls with
  // UNAVAILABLE; later NextTask calls get UNAVAILABLE too. Idempotent; call
  // before shutting the gRPC server down.
  void Shutdown();
  ~Coordinator();

  // FAILED_PRECONDITION when the job is finished or `job_id` names another
  // job; RESOURCE_EXHAUSTED at max_workers or for a job_id, hostname or
  // peer_address longer than kMaxIdBytes.
  absl::StatusOr<v1::RegisterResponse> Register(
      const v1::RegisterRequest& request);
  // NOT_FOUND for an unknown or evicted worker. Returns the generation and
  // the fence.
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const std::string& worker_id);
  // Removes the worker as if it had died (its unpushed work is released).
  absl::Status Leave(const std::string& worker_id);
  // Calls `done` with the worker's next action. Besides the errors of the
  // class comment: RESOURCE_EXHAUSTED when the report's byte-count maps pass
  // kMaxByteCountEntries keys or kMaxIdBytes per key, or the worker already
  // has kMaxParkedLeasesPerWorker calls waiting.
  void NextTask(const v1::NextTaskRequest& request, NextTaskCallback done);
  v1::StatusResponse Status() const;
  bool finished() const;
  // Blocks until the job finished or `timeout` passed; true when finished.
  bool WaitUntilFinished(absl::Duration timeout) const;
  const v1::JobSpec& job() const { return options_.job; }
  // Peer addresses of the members in rank (join) order.
  std::vector<std::string> PeerAddresses() const;
  // Bytes the adapter counted for the coordinator's own traffic (also added
  // to ferry_bytes_total{role="coordinator"}).
  void CountBytes(const std::string& role, int64_t sent, int64_t received);
  // A consistent copy of the figures /metrics shows. Cheap (no proto).
  CoordinatorGauges Gauges() const;
  // Evicts members whose last heartbeat is older than heartbeat_timeout and
  // answers WAIT to parked NextTask calls whose long poll is over, both by
  // options.clock. The reaper thread calls it every 100 ms of real time;
  // tests call it after advancing a FakeClock.
  void CheckTimeouts();

 private:
  using Member = Membership::Member;
  using Slot = StepSlot;
  using Reply = ParkedCalls::Reply;

  Coordinator(CoordinatorOptions options, StepRules rules, ShardControl* shards,
              WeightsEvaluator* evaluator);
  static absl::StatusOr<std::unique_ptr<Coordinator>> Create(
      CoordinatorOptions options, ShardControl* shards,
      WeightsEvaluator* evaluator);

  // Records a step report; an error is returned to the caller.
  absl::Status RecordDone(Member& member, const v1::StepReport& done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A report of a diverged step (StepReport.diverged): the job stops, its
  // error and event `diverged` say why; INVALID_ARGUMENT for a reason over
  // 1,000 bytes (nothing changes).
  absl::Status StopDiverged(const Member& member, const v1::StepReport& done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A response for the worker now, or nullopt to keep it waiting.
  std::optional<absl::StatusOr<v1::NextTaskResponse>> TryAssign(
      const v1::NextTaskRequest& request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `after_step` >= 0: only a step after it (prefetch; two steps may be
  // open), or one formed again under a fence newer than `held_fence`.
  std::optional<v1::NextTaskResponse> TryAssignSync(Member& member,
                                                    int64_t after_step,
                                                    int64_t held_fence)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The TRAIN lease of `member`'s slot in an open step TryAssignSync may
  // hand out (same `after_step` / `held_fence` rules); nullopt when none.
  std::optional<v1::NextTaskResponse> LeaseOpenSlot(Member& member,
                                                    int64_t after_step,
                                                    int64_t held_fence)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<v1::NextTaskResponse> TryAssignAsync(Member& member)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forms the next step when fewer than `max_open` open steps are still
  // collecting reports (not finalizing).
  bool FormStep(int max_open) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Time Now() const { return options_.clock->Now(); }
  // CheckTimeouts()'s work; replies go out after the lock.
  void ExpireTimeouts(std::vector<Reply>& replies)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the lease of `step` names its contributors: the job finalizes
  // on push, and `step` is not one the coordinator checkpoints.
  bool LeaseNamesContributors(int64_t step) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Finalize on push: the shards must hear of a new generation when it
  // moves, since a step applied on push raises no fence before the next
  // lease can be pulled for.
  bool FenceDue() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends the fence (outside the lock); an unreachable shard gets it from
  // its next FinalizeStep instead (an event records the failure).
  void FenceShards(int64_t generation) ABSL_LOCKS_EXCLUDED(mu_);
  void AddRing(const OpenStep& step, size_t slot_index,
               v1::NextTaskResponse& r) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves to the next epoch when the current one is complete; false when
  // the job has no more epochs.
  bool AdvanceEpochIfComplete() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the next epoch must wait because the shards hold no checkpoint
  // at `version`, the end of the current one (a failed write: a full or
  // read-only disk); then the checkpoint is owed (CheckpointPlan) and a
  // recovery required, which retries it (RetryOwedCheckpoint).
  bool EpochStartUnsaved(int64_t version) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Finalizer thread, no lock: one attempt at the owed checkpoint after a
  // wait growing with the failures. True when handled (written, the epoch
  // advanced; or failed again, still owed); false when none is owed or a
  // shard is behind it (it restarted: the caller rolls back instead).
  bool RetryOwedCheckpoint();
  // A checkpoint at `version` failed with `status`: the log line and the
  // checkpoint_failed event (saying when the next epoch waits for it), a
  // failed attempt at an owed one, checkpoints off for good when the shards
  // have no directory.
  void CheckpointFailed(int64_t version, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits (unless stopping) before the next attempt at an owed checkpoint:
  // shard_retry doubling with each failure, at most 10 s. True when
  // stopping.
  bool WaitBeforeOwedCheckpoint() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The outcome of a save or sync of the state: the first failure of a run
  // of them is logged, evented (state_save_failed) and shown in the status
  // (state_error); the first success after them clears it (state_saved).
  void StateSaved(const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The owed checkpoint is written or moot: forgotten, with the error its
  // wait set (checkpoint_wait_limit).
  void SettleOwedCheckpoint() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeQueueFinalize(OpenStep& step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops a member that left or died: unpushed work goes back to the queue.
  // `why`: "left" or "evicted" (the event's kind).
  void RemoveMember(const std::string& worker_id, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Start();
  // Re-evaluates parked NextTask calls; replies go out after the lock.
  void ServeWaiters(std::vector<Reply>& replies, bool expire_all_due)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::NextTaskResponse Waiting() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A report-only call's answer, nullopt while it waits (.cc).
  std::optional<v1::NextTaskResponse> ReportAnswer(
      const v1::NextTaskRequest& r) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int ActiveCount() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return membership_.size();
  }
  // Enough workers to form a step (min_workers now, start_workers ever).
  bool EnoughWorkers() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return ActiveCount() >= options_.min_workers &&
           membership_.workers_seen() >= options_.start_workers;
  }
  // Ends training; the final evaluation names `epoch` when the job ended
  // with that epoch, -1 when it stopped inside one.
  void FinishJob(int64_t epoch = -1) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Evaluations run by the workers (coordinator_worker_evals.cc): a job
  // whose model is its workers' is scored by a worker that evaluates.
  bool WorkerEvaluated() const;
  // `member` evaluates and holds the job's weights (or can pull them).
  bool CanEvaluate(const Member& member) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AnyMemberEvaluates() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queue the epoch end / the job's end for a worker (no-op unless
  // WorkerEvaluated(); the final only while a member evaluates).
  void QueueWorkerEpochEnd(int64_t version, int64_t epoch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void QueueWorkerFinal(int64_t version, int64_t epoch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sync jobs: an epoch end waits for a worker's evaluation; no step forms.
  bool StepsWaitForWorkerEval() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An EVALUATE task for `member` when it evaluates and an evaluation
  // waits that is not another member's.
  std::optional<v1::NextTaskResponse> EvalTaskFor(const Member& member)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A worker's report: its EvalPoint (and the job's end after the final
  // one). INVALID_ARGUMENT for bad figures (nothing recorded); a stale
  // report is logged and ignored.
  absl::Status RecordWorkerEvaluation(Member& member,
                                      const v1::WorkerEvaluation& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `worker_id` left: what it held goes to another worker; every
  // evaluation is given up when no member evaluates any more.
  void GiveBackEvals(const std::string& worker_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Finishes the job once its final evaluation by the coordinator
  // (final_scored_) and by a worker (when one was queued) are both done.
  void MaybeFinishJob() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Lets steps form again after an epoch-end evaluation's fetch and answers
  // the long polls that waited for it.
  void ReleaseStepsHeldForEval() ABSL_LOCKS_EXCLUDED(mu_);

  // Elasticity (coordinator_steps.cc). Aborts every open step >= `from`
  // (finalizing ones too when `include_finalizing`): tasks back to the
  // queue, steps re-formed later under a new generation and fence.
  void AbortOpenSteps(int64_t from, bool include_finalizing,
                      const std::string& why, const std::string& worker_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks `step` applied: tasks applied, log kept, version bumped.
  void ApplyStep(int64_t number) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Finalizer thread, no lock: brings the shards and the accounting to one
  // consistent step (after a shard restart or a coordinator restart).
  void RecoverShards(const std::string& why);
  // Stops the job for good: shard `shard` is at `version`, past every
  // step formed (WatchShards). Answers the parked calls into `replies`.
  void HaltForeignShardState(int shard, int64_t version,
                             std::vector<Reply>& replies)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // PS jobs whose steps keep their slots (sum on arrival, pipelines), in a
  // recovery: counts as applied the finalizing steps (every slot reported)
  // below `low`, the lowest shard version, whose leases named their set:
  // every shard applied them on push over all their slots, so a rollback
  // must not undo them.
  void ApplyStepsPastEveryShard(int64_t low) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Settles the step that was being finalized: applied (everywhere) or not.
  void ResolveInDoubt(bool applied) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Finalizer thread, no lock, when idle: starts RecoverShards when a shard
  // is behind the job's version.
  void WatchShards();
  // Async and SSP jobs (coordinator_async_barrier.cc), finalizer thread, no
  // lock, while the recovery is needed (no lease forms): waits until no
  // lease is out, fences the shards at a new generation, then checks that
  // every shard's version equals the applied tasks. Equal: checkpoints
  // every shard there (event async_checkpoint) and lets the epoch advance;
  // else RollBackAsync.
  void RunAsyncBarrier(const std::string& why);
  // Restores every shard to the newest async checkpoint (the start when
  // there is none) under `generation` and re-queues the tasks applied
  // since (event async_rolled_back); sets error_ when it cannot.
  void RollBackAsync(const std::vector<int64_t>& versions, int64_t applied,
                     int64_t generation, const std::string& why);
  // Whether a member holds an async lease.
  bool AnyLeaseOut() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Async and SSP with shards: the barrier runs (every checkpoint_every
  // tasks, at every epoch end and at the job's start).
  bool async_barriers() const { return shards_ != nullptr && !rules_.sync(); }
  // Undoes the applied steps >= target in the accounting.
  void RollBackAccounting(int64_t target) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ring checkpoints (coordinator_ring_checkpoints.cc). Ring and hybrid
  // jobs, with no step open: when no member holds the job's state
  // (RingLostTheJobState), or a part of it (a pipeline stage, a slice of
  // the sharded optimizer state) is held by none, takes the job back to the
  // newest complete ring checkpoint (its leases' restore_checkpoint) or the
  // start, re-queuing the undone steps' tasks; sets error_ when it cannot.
  // Hybrid: to the newest version both the ring and the shards have a
  // checkpoint of; when that is below the shards' version, requires a recovery
  // (the shards are restored to it) and returns nullopt, and the next call,
  // with the shards there, returns it. Returns the checkpoint's version to
  // restore, if any.
  std::optional<int64_t> ResumeRingIfStateLost(
      const std::vector<const Member*>& ranked)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the step formed next, taking `samples` of the `remaining`
  // samples of its epoch, is a ring checkpoint's.
  bool RingCheckpointDue(int64_t samples, int64_t remaining) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A report of `step` by `worker_id`: its checkpoint part's result, or
  // (a failed step) why the ring checkpoint could not be restored.
  void NoteRingCheckpointReport(OpenStep& step, Slot& slot,
                                const v1::StepReport& done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ring pipelines: the ranges each member of applied `step` holds current
  // now (Member::held_ranges, StageHoldersOf). Sharded optimizer state:
  // its slice (its rank), the other members none.
  void NoteRangesHeld(const OpenStep& step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ApplyStep of a checkpoint's step: records the checkpoint (durably) when
  // every member wrote its part.
  void RecordRingCheckpoint(const OpenStep& step)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Finalizer thread, no lock: checkpoints the shards at `version` when due
  // (or `forced`).
  void MaybeCheckpoint(int64_t version, bool epoch_end, bool forced = false);
  // Hybrid: when no member holds the ring's dense state of the newest
  // checkpoint (a rollback to it would find no copy), the next step formed
  // is checkpointed (keep_state, and the shards at its version).
  void ForceCheckpointIfNoCopyLeft() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t CommittedSteps() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddEvent(const std::string& kind, const std::string& worker_id,
                int64_t step, int64_t samples_lost, const std::string& detail)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    events_.Add(Now(), kind, worker_id, step, samples_lost, detail);
  }
  // Persistence (coordinator_state.cc): writes the state when state_dir is
  // set (a failure is logged; the job goes on); durable when
  // state_sync_interval is zero, else by SyncStateIfDue.
  void Persist() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Persist, then make the state durable now (where a machine crash must
  // not take the coordinator behind the shards: checkpoints, rollbacks).
  void PersistDurably() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes the saved state durable when it changed since the last sync and
  // state_sync_interval has passed; the fsync runs with mu_ released.
  void SyncStateIfDue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The fsync itself, under mu_; a failure is logged (the next save or
  // sync tries again).
  void SyncStateNow() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Loads the state from state_dir if there is one.
  absl::Status Resume() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::CoordinatorState SaveState() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status LoadState(const v1::CoordinatorState& state)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Training curves (coordinator_metrics.cc): points are queued under the
  // lock and written by FlushMetrics() after it, in queue order.
  void AddStepReport(OpenStep& step, const std::string& worker_id,
                     const v1::StepReport& done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A step's or task's end and beginning on the workers' clocks, and its
  // entry in the throughput window (`ended`, `began`: see TimedStep).
  void RecordAppliedStep(const OpenStep& step, absl::Time began,
                         absl::Time ended) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecordAppliedTask(const v1::StepReport& done, absl::Time began,
                         absl::Time ended) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void QueueEvalMetrics(const v1::EvalPoint& point)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `step`: the committed step (its reporters' counts as of their reports);
  // null: every worker's latest counts.
  void FillCommon(StepMetrics& m, const OpenStep* step, absl::Time began,
                  absl::Time ended) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FlushMetrics() ABSL_LOCKS_EXCLUDED(mu_, metrics_mu_);

  // The finalizer thread: takes its next action under mu_
  // (NextFinalizerAction) and runs it without the lock, so nothing it waits
  // on (shard RPCs, checkpoints) holds mu_.
  void FinalizerLoop() ABSL_LOCKS_EXCLUDED(mu_);
  FinalizerAction NextFinalizerAction() ABSL_LOCKS_EXCLUDED(mu_);
  // Applies action.number on the shards (kFinalizeStep), then commits it,
  // or starts a recovery when a shard lost it.
  void RunFinalizeStep(const FinalizerAction& action) ABSL_LOCKS_EXCLUDED(mu_);
  void EvaluatorLoop();
  void ReaperLoop();

  const CoordinatorOptions options_;
  const StepRules rules_;  // what the job's settings decide about its steps
  ShardControl* const shards_;  // null in ring mode without shards
  WeightsEvaluator* const weights_;
  // The job's optimizer, for the learning rate each metrics line reports.
  const OptimizerConfig optimizer_ = FromProto(options_.job.optimizer());
  const absl::Time start_ = options_.clock->Now();
  // Save under mu_; Sync also off it (SyncStateIfDue).
  CoordinatorPersistence persistence_;
  bool state_unsynced_ ABSL_GUARDED_BY(mu_) = false;  // saved, not synced
  absl::Time last_state_sync_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Membership membership_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<EpochTaskQueue> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::EpochAccounting> accounting_ ABSL_GUARDED_BY(mu_);
  // Sync mode.
  StepTable steps_ ABSL_GUARDED_BY(mu_);
  int64_t steps_applied_ ABSL_GUARDED_BY(mu_) = 0;  // shard version (sync)
  // Async mode: tasks applied so far (sum over workers).
  int64_t tasks_applied_ ABSL_GUARDED_BY(mu_) = 0;
  // Async: the applied tasks the last barrier found every shard at (-1:
  // none since this process started).
  int64_t async_checked_tasks_ ABSL_GUARDED_BY(mu_) = -1;
  // Evaluations, the steps they hold, and the job's end.
  EvalSchedule evals_ ABSL_GUARDED_BY(mu_);
  // Those the workers run (a job whose model is its workers').
  WorkerEvals worker_evals_ ABSL_GUARDED_BY(mu_);
  // The coordinator's part of the final evaluation is done: OK or why it
  // failed (unset before; the job finishes once the workers' part is too).
  std::optional<absl::Status> final_scored_ ABSL_GUARDED_BY(mu_);
  // NextTask calls waiting for an action (long polls).
  ParkedCalls parked_ ABSL_GUARDED_BY(mu_);
  // The membership generation FormStep last logged waiting for a whole
  // pipeline replica in (logged once per generation).
  int64_t replica_wait_logged_ ABSL_GUARDED_BY(mu_) = -1;
  // Progress figures, the throughput window and the coordinator's bytes.
  JobProgress progress_ ABSL_GUARDED_BY(mu_);

  // Elasticity: the applied-step log and checkpoints, the fence, the step
  // in doubt and whether a recovery is needed, and when to checkpoint.
  RecoveryLog recovery_ ABSL_GUARDED_BY(mu_);
  RecoveryState recovery_state_ ABSL_GUARDED_BY(mu_);
  CheckpointPlan checkpoint_plan_ ABSL_GUARDED_BY(mu_);
  // The job's ring members write checkpoints (JobSpec.ring_checkpoint_dir,
  // a ring job without ring embedding tables: ring, ring pipelines, or
  // hybrid's dense layers).
  const bool ring_checkpoints_;
  // Ring pipelines: the flat ranges whose holders the coordinator follows
  // (the stages, then the BatchNorm state when `pipeline_state_ring_`); 0
  // for other jobs.
  int pipeline_ranges_ = 0;
  // Rings with sharded optimizer state: the slices the job's state is cut
  // into (the ring that applied the last step; each member's held_ranges
  // name its slice); 0: none yet or not sharded.
  int optimizer_slices_ ABSL_GUARDED_BY(mu_) = 0;
  bool pipeline_state_ring_ = false;

  JobEvents events_ ABSL_GUARDED_BY(mu_);
  // Why the job cannot go on (StatusResponse.error); empty while it can.
  std::string error_ ABSL_GUARDED_BY(mu_);
  // error_ is the owed checkpoint's wait past checkpoint_wait_limit (it
  // clears when that checkpoint is written).
  bool error_is_checkpoint_wait_ ABSL_GUARDED_BY(mu_) = false;
  // Why the last save of the state failed (StatusResponse.state_error);
  // empty while saves work.
  std::string state_error_ ABSL_GUARDED_BY(mu_);
  // Why training diverged (StopDiverged); while set, no lease is given.
  std::string diverged_ ABSL_GUARDED_BY(mu_);
  // Why the job cannot go on at all (a shard holds another run's state:
  // WatchShards); while set, no lease is given either.
  std::string halted_ ABSL_GUARDED_BY(mu_);
  double start_unix_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<absl::Time> last_state_write_ ABSL_GUARDED_BY(mu_);

  // Training curves waiting for FlushMetrics() (kept only with a metrics
  // sink); metrics_mu_ keeps them in order between the threads that flush.
  absl::Mutex metrics_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  MetricsLines lines_ ABSL_GUARDED_BY(mu_);

  std::thread finalizer_, evaluator_, reaper_;
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_COORDINATOR_H_

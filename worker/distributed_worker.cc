#include "worker/distributed_worker.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/backoff.h"
#include "common/file_system.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/step_trace.h"
#include "coordinator/coordinator_client.h"
#include "worker/divergence.h"
#include "worker/gradient_exchange.h"
#include "worker/lease_trainer.h"
#include "worker/make_gradient_exchange.h"
#include "worker/worker_metrics.h"

namespace ferry {
namespace {

constexpr int64_t kLogEverySteps = 50;
// Deadline of the ShardInfo calls that tell waiting from failing.
constexpr absl::Duration kShardCheckTimeout = absl::Seconds(2);

void Log(const std::string& line) { LogInfo(line); }

// Marks Worker::Evicted's status (IsEviction).
constexpr char kEvictionPayload[] = "ferry.dev/worker-evicted";

// Failures after which the worker gives the step up and asks for the next.
bool IsStepRetriable(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) ||
         absl::IsAborted(s) || absl::IsFailedPrecondition(s) ||
         absl::IsAlreadyExists(s) || absl::IsCancelled(s);
}

class Worker {
 public:
  Worker(const WorkerOptions& options, WorkerDeps deps)
      : options_(options), deps_(std::move(deps)), clock_(*deps_.clock) {}

  absl::StatusOr<WorkerSummary> Run() {
    const absl::Time start = clock_.Now();
    if (absl::Status joined = Join(); !joined.ok()) {
      if (IsJobFinishedTraining(joined)) {
        // Arrived (or came back after an eviction) once training was over.
        summary_.end_reason = "finished";
        Log("finished after 0 steps: the job had finished training when "
            "this worker registered");
        return summary_;
      }
      if (!stop_requested()) return joined;
      summary_.end_reason = "stopped";  // asked to stop while registering
      return summary_;
    }
    absl::Status status = Setup();
    if (status.ok()) {
      // The coordinator aborted open steps: give up a step in flight at
      // once instead of waiting for its deadline (fenced modes).
      GradientExchange* exchange = exchange_.get();
      LeaseTrainer* trainer = trainer_.get();
      heartbeater_->SetFenceListener([exchange, trainer](int64_t fence) {
        exchange->CancelIfOlder(fence);
        trainer->CancelIfOlder(fence);
      });
      // Exchanges that keep undo state drop what committed steps need no
      // more.
      if (CommittedStepsObserver* observer = committed_observer_) {
        heartbeater_->SetCommittedListener(
            [observer](int64_t steps) { observer->ObserveCommitted(steps); });
      }
      status = Loop();
      // Any call the coordinator refused because this worker is no longer
      // a member (a report, a lease): evicted, whichever call noticed.
      if (absl::IsNotFound(status) && !IsEviction(status) &&
          (heartbeater_->evicted() ||
           absl::StrContains(status.message(), "is not a member"))) {
        status = Evicted();
      }
    }
    absl::Status gathered = absl::OkStatus();
    if (status.ok() && summary_.end_reason == "finished") {
      // Every member does this once (ring pipelines gather the stages).
      if (EndOfTrainingExchange* end =
              exchange_->capability<EndOfTrainingExchange>();
          end != nullptr) {
        gathered = end->EndOfTraining();
      }
      if (!gathered.ok()) {
        Log(absl::StrCat("gathering the final weights: ", gathered.ToString()));
      }
    }
    if (status.ok() && !options_.final_weights_path.empty()) {
      status = gathered.ok() ? SaveFinalWeights() : gathered;
    }
    heartbeater_->SetFenceListener(nullptr);
    heartbeater_->SetCommittedListener(nullptr);
    heartbeater_->Stop();
    if (!absl::IsNotFound(status)) {  // an evicted worker is unknown already
      v1::LeaveRequest leave;
      leave.set_worker_id(worker_id_);
      const absl::Status left = coordinator().Leave(leave);
      if (!left.ok()) Log(absl::StrCat("leave failed: ", left.ToString()));
    }
    if (!status.ok()) return status;
    summary_.AddTotals(*exchange_, committed_observer_, *deps_.peer,
                       coordinator().bytes());
    summary_.link = options_.link;
    summary_.wall_seconds = Seconds(start);
    if (trainer_ != nullptr) summary_.trainer = trainer_->SummaryJson();
    return summary_;
  }

 private:
  CoordinatorApi& coordinator() { return *deps_.coordinator; }
  bool stop_requested() const {
    return options_.stop_requested != nullptr &&
           options_.stop_requested->load();
  }
  double Seconds(absl::Time since) const {
    return absl::ToDoubleSeconds(clock_.Now() - since);
  }

  // Registers and starts heartbeats.
  absl::Status Join() {
    const std::string peer_address = deps_.peer->address();
    v1::RegisterRequest request;
    request.set_peer_address(peer_address);
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    request.set_hostname(host);
    request.set_pid(getpid());
    absl::StatusOr<v1::RegisterResponse> reg = coordinator().Register(request);
    if (IsJobFinishedTraining(reg.status())) return reg.status();
    if (!reg.ok()) {
      return absl::Status(reg.status().code(),
                          absl::StrCat("register with coordinator ",
                                       options_.coordinator_address, ": ",
                                       reg.status().message()));
    }
    job_ = reg->job();
    worker_id_ = reg->worker_id();
    StepTrace::AddName(absl::StrCat("worker ", worker_id_));
    deps_.peer->SetJob(job_.job_id());
    summary_.worker_id = worker_id_;
    summary_.job_id = job_.job_id();
    const int64_t interval_ms = reg->heartbeat_interval_ms();
    const absl::Duration interval = absl::Milliseconds(
        interval_ms > 0 ? std::max<int64_t>(interval_ms, 50) : 1000);
    heartbeater_ = std::make_unique<Heartbeater>(&coordinator(), worker_id_,
                                                 reg->generation(), interval);
    Log(
        absl::StrFormat("registered with %s as %s: job %s, generation %d, "
                        "model %s, %s, %d shards, peer service at %s",
                        options_.coordinator_address, worker_id_, job_.job_id(),
                        reg->generation(), job_.model(), job_.dataset(),
                        job_.shard_addresses_size(), peer_address));
    return absl::OkStatus();
  }

  // Checks the job, builds backend, model, data and buffers, then the
  // job's exchange (the only place the mode is looked at).
  absl::Status Setup() {
    RETURN_IF_ERROR(CheckExchangeJob(job_));
    if (options_.make_trainer) {
      ASSIGN_OR_RETURN(trainer_, options_.make_trainer(job_));
    } else {
      ASSIGN_OR_RETURN(
          trainer_,
          MakeLeaseTrainer(job_, options_.device, options_.threads,
                           deps_.peer.get(), options_.collective_timeout));
    }
    summary_.device = trainer_->backend()->Name();
    ExchangeContext context;
    context.job = &job_;
    context.worker_id = worker_id_;
    context.layout = &trainer_->layout();
    context.backend = trainer_->backend();
    context.buffers = trainer_->buffers();
    context.collective_timeout = options_.collective_timeout;
    context.ring_prompt_commit_min_bytes =
        options_.ring_prompt_commit_min_bytes;
    context.shard_check_timeout =
        std::min(options_.rpc_timeout, kShardCheckTimeout);
    ASSIGN_OR_RETURN(exchange_, MakeGradientExchange(context, deps_.peer.get(),
                                                     deps_.parameter_client));
    policy_ = exchange_->policy();
    committed_observer_ = exchange_->capability<CommittedStepsObserver>();
    Log(absl::StrFormat("%d parameters, %d train samples, device %s, %s mode",
                        trainer_->layout().total_elements(),
                        trainer_->train_samples(), summary_.device,
                        exchange_->mode()));
    return absl::OkStatus();
  }

  // A NextTask call running on its own thread.
  struct PendingLease {
    std::future<absl::StatusOr<v1::NextTaskResponse>> result;
    std::optional<v1::StepReport> report;            // sent with it
    std::optional<v1::WorkerEvaluation> evaluation;  // sent with it
    absl::Time asked;
  };

  // A NextTask request of this worker: its evaluations (whether it runs
  // them, and the result of one it ran) ride on every call.
  v1::NextTaskRequest Request() {
    v1::NextTaskRequest request;
    request.set_worker_id(worker_id_);
    request.set_generation(heartbeater_->generation());
    request.set_evaluates(trainer_->evaluates());
    if (std::optional<v1::WorkerEvaluation> e = trainer_->TakeEvaluation())
      evaluation_ = *std::move(e);
    if (evaluation_.has_value()) {
      *request.mutable_evaluation() = *std::move(evaluation_);
      evaluation_.reset();
    }
    return request;
  }

  void Ask(std::optional<v1::StepReport> report,
           std::optional<int64_t> after_step) {
    v1::NextTaskRequest request = Request();
    if (report.has_value()) *request.mutable_done() = *report;
    if (after_step.has_value()) {
      request.set_after_step(*after_step);
      request.set_fence(held_fence_);
    }
    pending_.emplace();
    pending_->report = std::move(report);
    if (request.has_evaluation()) pending_->evaluation = request.evaluation();
    pending_->asked = clock_.Now();
    pending_->result = std::async(std::launch::async, [this, request] {
      return coordinator().NextTask(request);
    });
  }

  // Waits for the pending call, serving the exchange meanwhile (ring mode:
  // the coordinator's evaluation may be what the coordinator waits for).
  absl::StatusOr<v1::NextTaskResponse> AwaitLease() {
    while (pending_->result.wait_for(std::chrono::milliseconds(20)) !=
           std::future_status::ready) {
      exchange_->BetweenSteps();
    }
    return pending_->result.get();
  }

  // Drops a prefetched lease (its step is redone or the worker stops).
  void DropPendingLease() {
    if (!pending_.has_value()) return;
    (void)AwaitLease();
    pending_.reset();
  }

  // Waits for the report sent last (if any) and returns its status.
  absl::Status AwaitReport() {
    if (!report_in_flight_.valid()) return absl::OkStatus();
    return report_in_flight_.get();
  }

  // Sync mode, prefetching: the step's report goes out on its own at once.
  // `await_applied`: the answer comes once the step is applied (or no
  // longer open), and its committed steps reach the exchange's observer.
  absl::Status SendReport(v1::NextTaskRequest request,
                          const v1::StepReport& report,
                          bool await_applied = false) {
    *request.mutable_done() = report;
    request.set_report_only(true);
    request.set_await_applied(await_applied);
    absl::Status status;
    for (int attempt = 0; attempt < 3; ++attempt) {
      absl::StatusOr<v1::NextTaskResponse> answer =
          coordinator().NextTask(request);
      status = answer.status();
      if (answer.ok())
        heartbeater_->ObserveCommitted(answer->committed_steps());
      if (!absl::IsDeadlineExceeded(status)) break;
    }
    if (absl::IsAborted(status)) {  // the step went on without us
      Log(absl::StrCat("report of step ", report.step(),
                       " refused: ", status.ToString()));
      return absl::OkStatus();
    }
    return status;
  }

  // What the loop does after a failed step: OK to ask for the next lease,
  // or the error that ends the worker.
  absl::Status HandleFailure(const v1::NextTaskResponse& lease,
                             const absl::Status& failure, int& failures,
                             Backoff& backoff) {
    exchange_->AbandonStep();
    if (IsDivergence(failure)) return StopDiverged(lease, failure);
    if (policy_.report_failed_steps) {
      // Every member restarts the step from the committed state.
      RETURN_IF_ERROR(AwaitReport());
      v1::StepReport failed;
      failed.set_step(lease.step());
      failed.set_fence(lease.fence());
      failed.set_failed(true);
      exchange_->AddToFailedReport(failed);
      (void)SendReport(Request(), failed);
    }
    DropPendingLease();  // the prefetched lease: redo this step first
    if (!IsStepRetriable(failure)) return failure;
    ++summary_.abandoned_steps;
    Log(absl::StrCat("abandoned step ", lease.step(), ": ",
                     failure.ToString()));
    // A step closed without us (a sync quorum cut the straggler) is
    // expected, not a fault: it does not count towards giving up.
    const bool closed_without_us =
        absl::IsFailedPrecondition(failure) || absl::IsAlreadyExists(failure);
    // A sync step waits for all its contributors: a call that ran out of
    // time waiting for another worker (one cut off from a shard, say) did
    // not fail here and does not count either, so that the workers that
    // reach every shard outlast the one that does not, which gives up and
    // leaves (tests/fault/network_partition_test.py).
    if (!closed_without_us && !exchange_->WaitedForOthers(failure) &&
        ++failures >= policy_.max_consecutive_failures) {
      return failure;
    }
    // E.g. a ring keeps failing until the coordinator evicts a dead member
    // (a heartbeat timeout): back off and wait for it.
    if (policy_.backoff_after_failure) backoff.Wait();
    return absl::OkStatus();
  }

  // A diverged step ends the worker: the coordinator hears why (it stops
  // the job; StepReport.diverged), and the worker's error says it too.
  absl::Status StopDiverged(const v1::NextTaskResponse& lease,
                            const absl::Status& failure) {
    const std::string why = DivergenceReason(failure);
    (void)AwaitReport();
    DropPendingLease();
    v1::StepReport report;
    report.set_step(lease.step());
    report.set_fence(lease.fence());
    report.set_diverged(why);
    if (absl::Status sent = SendReport(Request(), report); !sent.ok()) {
      Log(absl::StrCat("could not tell the coordinator the step diverged: ",
                       sent.ToString()));
    }
    summary_.end_reason = "diverged";
    return DivergedError(lease.step(), why);
  }

  // Sync mode leases are prefetched: while a step runs, the lease of the
  // next one is already asked for, and each report goes out on its own as
  // soon as the step is done, so no step waits for a coordinator round trip.
  absl::Status Loop() {
    const bool prefetch = job_.consistency() == v1::CONSISTENCY_SYNC;
    std::optional<v1::StepReport> done;  // not yet sent
    std::optional<int64_t> last_step;    // leased, when prefetching
    int failures = 0;
    Backoff backoff(RetryPolicy{.initial_backoff = absl::Milliseconds(100),
                                .max_backoff = absl::Seconds(1),
                                .budget = absl::InfiniteDuration()},
                    &clock_);
    while (true) {
      if (heartbeater_->evicted()) return Evicted();
      const bool stopping = stop_requested();
      if (!pending_.has_value()) {
        if (stopping && !done.has_value()) break;
        exchange_->BetweenSteps();
        Ask(std::move(done), prefetch ? last_step : std::nullopt);
        done.reset();
      }
      absl::StatusOr<v1::NextTaskResponse> lease = AwaitLease();
      std::optional<v1::StepReport> sent = std::move(pending_->report);
      std::optional<v1::WorkerEvaluation> sent_evaluation =
          std::move(pending_->evaluation);
      const absl::Time asked = pending_->asked;
      pending_.reset();
      if (absl::IsNotFound(lease.status())) return Evicted();
      // Asked to stop before or while the lease was awaited: the last report
      // went out, Leave releases a lease, and an error of the lease call
      // (the coordinator restarting, the client cancelled by the stop) is
      // no failure of a worker that leaves.
      if (stopping || stop_requested()) break;
      if (absl::IsAborted(lease.status())) continue;  // a step without us
      if (absl::IsDeadlineExceeded(lease.status()) &&
          ++failures < kMaxConsecutiveLeaseFailures) {
        done = std::move(sent);  // may not have arrived
        if (sent_evaluation.has_value()) evaluation_ = sent_evaluation;
        continue;
      }
      if (!lease.ok()) return lease.status();
      heartbeater_->ObserveGeneration(lease->generation());
      if (lease->action() == v1::NextTaskResponse::FINISH) {
        summary_.end_reason = "finished";
        break;
      }
      if (lease->action() == v1::NextTaskResponse::EVALUATE) {
        // The job's final weights: evaluated here, the result goes with
        // the next call, which FINISH answers once it is recorded.
        RETURN_IF_ERROR(trainer_->Evaluate(*lease, *exchange_));
        continue;
      }
      if (lease->action() == v1::NextTaskResponse::WAIT) {
        // The coordinator long-polls; do not spin if it answered at once.
        clock_.SleepFor(absl::Milliseconds(100) - (clock_.Now() - asked));
        continue;
      }
      if (prefetch) {
        last_step = lease->step();
        held_fence_ = lease->fence();
        Ask(std::nullopt, last_step);
      }
      // The last step's undo state lies where this step writes: its commit
      // first (the report's answer carries it).
      if (committed_observer_ != nullptr &&
          committed_observer_->WantsCommitBeforeNextStep()) {
        RETURN_IF_ERROR(AwaitReport());
      }
      absl::StatusOr<v1::StepReport> report =
          policy_.fenced && lease->fence() < heartbeater_->fence()
              ? absl::AbortedError("the lease predates an abort (older fence)")
              : Train(*lease);
      if (!report.ok()) {
        last_step.reset();
        RETURN_IF_ERROR(
            HandleFailure(*lease, report.status(), failures, backoff));
        continue;
      }
      failures = 0;
      backoff.Reset();
      if (!prefetch) {
        done = *std::move(report);
        trainer_->StepReported();
        continue;
      }
      // The report travels while the next step runs; one at a time.
      RETURN_IF_ERROR(AwaitReport());
      // An exchange that keeps much undo state per uncommitted step hears
      // at once when this one is committed.
      const bool await_applied = committed_observer_ != nullptr &&
                                 committed_observer_->WantsPromptCommits();
      report_in_flight_ =
          std::async(std::launch::async,
                     [this, request = Request(), r = *std::move(report),
                      await_applied]() mutable {
                       return SendReport(std::move(request), r, await_applied);
                     });
      trainer_->StepReported();
      if (stop_requested()) break;
    }
    if (absl::Status last = AwaitReport(); !last.ok()) {
      // Leaving anyway (asked to stop): a report the coordinator could not
      // take (it is restarting) only leaves that step to be redone when
      // this member is missed.
      if (!stop_requested()) return last;
      Log(absl::StrCat("leaving without the last report delivered: ",
                       last.ToString()));
    }
    if (stop_requested()) DropPendingLease();
    if (summary_.end_reason.empty()) summary_.end_reason = "stopped";
    Log(absl::StrFormat("%s after %d steps (%d samples, %d abandoned); leaving",
                        summary_.end_reason, summary_.steps, summary_.samples,
                        summary_.abandoned_steps));
    return absl::OkStatus();
  }

  absl::Status Evicted() const {
    absl::Status evicted = absl::NotFoundError(
        absl::StrCat("worker ", worker_id_, " was evicted by coordinator ",
                     options_.coordinator_address,
                     " (missed heartbeats or removed); it stops without "
                     "finishing its step"));
    evicted.SetPayload(kEvictionPayload, absl::Cord(worker_id_));
    return evicted;
  }

  // Writes the weights the worker ends with (the exchange's final weights)
  // as raw little-endian fp32, atomically.
  absl::Status SaveFinalWeights() {
    ASSIGN_OR_RETURN(const std::vector<float> host, exchange_->FinalWeights());
    const std::string& path = options_.final_weights_path;
    const absl::string_view bytes(reinterpret_cast<const char*>(host.data()),
                                  host.size() * sizeof(float));
    if (absl::Status written =
            PosixFileSystem()->WriteFileAtomically(path, bytes);
        !written.ok()) {
      return absl::PermissionDeniedError(absl::StrCat(
          "cannot write the final weights to ", path, ": ", written.message()));
    }
    Log(absl::StrFormat("wrote %d final weights to %s", host.size(), path));
    return absl::OkStatus();
  }

  // One TRAIN lease through the exchange, then its report.
  absl::StatusOr<v1::StepReport> Train(const v1::NextTaskResponse& lease) {
    // The step's own clock readings: the coordinator's step times and
    // throughput are taken from them, not from the report's arrival.
    const absl::Time began = clock_.Now();
    ASSIGN_OR_RETURN(
        const StepResult step,
        trainer_->Train(lease, heartbeater_->generation(), *exchange_, clock_));
    const absl::Time exchanged = clock_.Now();
    if (!std::isfinite(step.stats.loss_sum)) {
      return DivergedError(
          lease.step(),
          absl::StrFormat("the loss over its %d samples is not finite (%g)",
                          step.samples, step.stats.loss_sum));
    }
    ++summary_.steps;
    summary_.samples += step.samples;
    summary_.loss_sum += step.stats.loss_sum;
    summary_.correct += step.stats.correct;
    summary_.compute_seconds += step.compute_seconds;
    summary_.comm_seconds += step.comm_seconds;
    v1::StepReport report;
    report.set_step(lease.step());
    report.set_fence(lease.fence());
    if (lease.tasks_size() > 0) report.set_task_id(lease.tasks(0).task_id());
    report.set_loss_sum(step.stats.loss_sum);
    report.set_correct(step.stats.correct);
    report.set_num_samples(step.samples);
    report.set_compute_seconds(step.compute_seconds);
    report.set_comm_seconds(step.comm_seconds);
    report.set_unique_ids(step.unique_ids);
    report.set_began_unix_seconds(
        absl::ToDoubleSeconds(began - absl::UnixEpoch()));
    report.set_exchanged_unix_seconds(
        absl::ToDoubleSeconds(exchanged - absl::UnixEpoch()));
    if (step.pipeline.has_value()) *report.mutable_pipeline() = *step.pipeline;
    RETURN_IF_ERROR(exchange_->AddToReport(report));
    AddRoleBytes("coordinator", coordinator().bytes(), report.mutable_bytes());
    step_metrics_.Record(step.samples, heartbeater_->generation(),
                         report.bytes());
    if (summary_.steps % kLogEverySteps == 0) {
      Log(absl::StrFormat(
          "step %d (epoch %d): loss %.4f, compute %.3f s, comm %.3f s",
          lease.step(), lease.epoch(),
          step.samples > 0 ? step.stats.loss_sum / step.samples : 0.0,
          step.compute_seconds, step.comm_seconds));
    }
    return report;
  }

  // Lease calls that time out in a row before the worker gives up.
  static constexpr int kMaxConsecutiveLeaseFailures = 10;

  const WorkerOptions& options_;
  // Declared first: outlives everything built from it.
  WorkerDeps deps_;
  Clock& clock_;
  std::unique_ptr<Heartbeater> heartbeater_;
  v1::JobSpec job_;
  std::string worker_id_;
  std::unique_ptr<LeaseTrainer> trainer_;
  std::unique_ptr<GradientExchange> exchange_;  // the job's mode
  // exchange_'s undo-state capability, or null (fixed with the exchange).
  CommittedStepsObserver* committed_observer_ = nullptr;
  ExchangePolicy policy_;
  std::optional<PendingLease> pending_;
  std::future<absl::Status> report_in_flight_;
  int64_t held_fence_ = 0;  // fence of the lease being trained (prefetching)
  // An evaluation's result not yet sent (its call failed: sent again).
  std::optional<v1::WorkerEvaluation> evaluation_;
  WorkerSummary summary_;
  WorkerStepMetrics step_metrics_;
};

}  // namespace

bool IsEviction(const absl::Status& status) {
  return absl::IsNotFound(status) &&
         status.GetPayload(kEvictionPayload).has_value();
}

absl::StatusOr<WorkerSummary> RunDistributedWorker(const WorkerOptions& options,
                                                   WorkerDeps deps) {
  if (options.coordinator_address.empty()) {
    return absl::InvalidArgumentError("no coordinator address");
  }
  if (options.threads < 1 || options.rpc_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("threads and rpc timeout must be > 0");
  }
  if (deps.peer == nullptr || deps.coordinator == nullptr ||
      deps.clock == nullptr) {
    return absl::InvalidArgumentError(
        "worker deps need a peer endpoint, a coordinator and a clock");
  }
  Worker worker(options, std::move(deps));
  return worker.Run();
}

}  // namespace ferry

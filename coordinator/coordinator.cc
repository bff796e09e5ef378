#include "coordinator/coordinator.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/peer_limits.h"
#include "common/prometheus_metrics.h"
#include "common/status_macros.h"
#include "coordinator/coordinator_api.h"

namespace ferry {
namespace {

v1::NextTaskResponse Action(v1::NextTaskResponse::Action action,
                            int64_t generation) {
  v1::NextTaskResponse response;
  response.set_action(action);
  response.set_generation(generation);
  return response;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Create(
    CoordinatorOptions options, ShardControl* shards) {
  return Create(std::move(options), shards, shards);
}

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Create(
    CoordinatorOptions options, WeightsEvaluator* evaluator) {
  // A job with shards is refused there: it needs their ShardControl.
  return Create(std::move(options), nullptr, evaluator);
}

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Create(
    CoordinatorOptions options, ShardControl* shards,
    WeightsEvaluator* evaluator) {
  const v1::JobSpec& job = options.job;
  if (job.global_batch() <= 0 || job.epochs() <= 0 || options.epoch_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("job needs global_batch > 0, epochs > 0 and a non-empty "
                     "dataset (got batch ",
                     job.global_batch(), ", epochs ", job.epochs(), ", ",
                     options.epoch_size, " samples)"));
  }
  ASSIGN_OR_RETURN(StepRules rules,
                   StepRules::For(job, options.finalize_on_push));
  if (rules.has_shards() && shards == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a ", ModeName(job.mode()), " job needs the shards' ShardControl"));
  }
  if (options.min_workers < 1) options.min_workers = 1;
  if (options.clock == nullptr) options.clock = RealClock();
  if (options.file_system == nullptr) options.file_system = PosixFileSystem();
  if (options.checkpoint_every < 0) {
    return absl::InvalidArgumentError("checkpoint_every must be >= 0");
  }
  std::unique_ptr<Coordinator> c(
      new Coordinator(std::move(options), rules, shards, evaluator));
  {
    absl::MutexLock lock(&c->mu_);
    RETURN_IF_ERROR(c->Resume());
  }
  c->Start();
  return c;
}

Coordinator::Coordinator(CoordinatorOptions options, StepRules rules,
                         ShardControl* shards, WeightsEvaluator* evaluator)
    : options_(std::move(options)),
      rules_(rules),
      shards_(shards),
      weights_(evaluator),
      persistence_(options_.file_system, options_.state_dir),
      progress_(options_.job.pipeline_stages()),
      checkpoint_plan_(rules_.has_shards(), options_.checkpoint_every),
      ring_checkpoints_(rules_.members_hold_weights() &&
                        !options_.job.ring_checkpoint_dir().empty()) {
  absl::MutexLock lock(&mu_);
  if (ring_checkpoints_ && rules_.ring_beside_shards())
    recovery_.KeepStepsForRingCheckpoints();
  if (rules_.members_hold_weights() && !rules_.ring_beside_shards() &&
      options_.job.pipeline_stages() > 1) {
    const absl::StatusOr<int64_t> state = JobStateElements(options_.job);
    pipeline_state_ring_ = state.ok() && *state > 0;
    pipeline_ranges_ =
        options_.job.pipeline_stages() + (pipeline_state_ring_ ? 1 : 0);
  }
  queue_ = std::make_unique<EpochTaskQueue>(0, options_.epoch_size);
  start_unix_ = absl::ToDoubleSeconds(Now() - absl::UnixEpoch());
}

void Coordinator::Start() {
  finalizer_ = std::thread([this] { FinalizerLoop(); });
  evaluator_ = std::thread([this] { EvaluatorLoop(); });
  reaper_ = std::thread([this] { ReaperLoop(); });
}

Coordinator::~Coordinator() { Shutdown(); }

void Coordinator::Shutdown() {
  std::vector<Reply> replies;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    PersistDurably();
    parked_.FailAll(absl::UnavailableError("coordinator is shutting down"),
                    replies);
  }
  ParkedCalls::Send(replies);
  for (std::thread* t : {&finalizer_, &evaluator_, &reaper_}) {
    if (t->joinable()) t->join();  // not started when Create() failed
  }
  FlushMetrics();
}

absl::StatusOr<v1::RegisterResponse> Coordinator::Register(
    const v1::RegisterRequest& request) {
  std::vector<Reply> replies;
  v1::RegisterResponse response;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [what, value] :
         {std::pair<absl::string_view, absl::string_view>{"job_id",
                                                          request.job_id()},
          {"hostname", request.hostname()},
          {"peer_address", request.peer_address()}}) {
      absl::Status status =
          CheckIdLength(absl::StrCat("the registration's ", what), value);
      if (!status.ok())
        return Metrics().Reject(MetricRole::kCoordinator, "register", status);
    }
    if (!request.job_id().empty() &&
        request.job_id() != options_.job.job_id()) {
      return Metrics().Reject(
          MetricRole::kCoordinator, "register",
          absl::FailedPreconditionError(
              absl::StrCat("this coordinator runs job '", options_.job.job_id(),
                           "', not '", request.job_id(), "'")));
    }
    if (evals_.training_done()) {
      return absl::FailedPreconditionError(kJobFinishedTraining);
    }
    if (options_.max_workers > 0 && ActiveCount() >= options_.max_workers) {
      return Metrics().Reject(
          MetricRole::kCoordinator, "register",
          LimitExceeded("the number of workers (--max-workers)",
                        ActiveCount() + 1, options_.max_workers));
    }
    const Member& member = membership_.Add(request, Now());
    AddEvent("joined", member.id, steps_.formed(), 0,
             absl::StrCat(request.hostname(), " pid ", request.pid()));
    response.set_worker_id(member.id);
    response.set_generation(membership_.generation());
    *response.mutable_job() = options_.job;
    response.set_heartbeat_interval_ms(
        absl::ToInt64Milliseconds(options_.heartbeat_interval));
    Persist();
    ServeWaiters(replies, false);
  }
  ParkedCalls::Send(replies);
  return response;
}

absl::StatusOr<v1::HeartbeatResponse> Coordinator::Heartbeat(
    const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(membership_.Heartbeat(worker_id, Now()));
  v1::HeartbeatResponse response;
  response.set_generation(membership_.generation());
  response.set_fence(recovery_state_.fence());
  response.set_committed_steps(CommittedSteps());
  return response;
}

CoordinatorGauges Coordinator::Gauges() const {
  absl::MutexLock lock(&mu_);
  CoordinatorGauges g;
  g.members = membership_.size();
  g.generation = membership_.generation();
  g.steps_applied = rules_.sync() ? steps_applied_ : tasks_applied_;
  g.samples_applied = progress_.samples_applied();
  g.finished = evals_.finished();
  g.last_state_write = last_state_write_;
  g.own_bytes = progress_.own_bytes();
  g.window = progress_.window().figures();
  return g;
}

absl::Status Coordinator::Leave(const std::string& worker_id) {
  std::vector<Reply> replies;
  {
    absl::MutexLock lock(&mu_);
    if (membership_.Find(worker_id) == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("worker ", worker_id, " is not a member"));
    }
    RemoveMember(worker_id, "left");
    ServeWaiters(replies, false);
  }
  ParkedCalls::Send(replies);
  return absl::OkStatus();
}

void Coordinator::NextTask(const v1::NextTaskRequest& request,
                           NextTaskCallback done) {
  std::vector<Reply> replies;
  {
    absl::MutexLock lock(&mu_);
    Member* member = membership_.Find(request.worker_id());
    if (stopping_) {
      replies.emplace_back(
          std::move(done),
          absl::UnavailableError("coordinator is shutting down"));
    } else if (member == nullptr) {
      replies.emplace_back(
          std::move(done),
          absl::NotFoundError(
              absl::StrCat("worker ", request.worker_id(),
                           " is not a member (evicted or never registered)")));
    } else {
      member->last_heartbeat = Now();
      if (WorkerEvaluated()) member->evaluates = request.evaluates();
      // The evaluation first: bad figures refuse the call before the
      // step's report is recorded.
      absl::Status recorded =
          request.has_evaluation()
              ? Metrics().Reject(
                    MetricRole::kCoordinator, "evaluation",
                    RecordWorkerEvaluation(*member, request.evaluation()))
              : absl::OkStatus();
      if (recorded.ok() && request.has_done()) {
        recorded = Metrics().Reject(MetricRole::kCoordinator, "report",
                                    RecordDone(*member, request.done()));
      }
      if (!recorded.ok()) {
        replies.emplace_back(std::move(done), recorded);
      } else if (request.report_only()) {
        if (std::optional<v1::NextTaskResponse> now = ReportAnswer(request)) {
          replies.emplace_back(std::move(done), *std::move(now));
        } else {
          parked_.Park(request, std::move(done), Now() + options_.long_poll);
        }
      } else if (auto now = TryAssign(request); now.has_value()) {
        replies.emplace_back(std::move(done), std::move(*now));
      } else if (const int64_t waiting = parked_.Count(request.worker_id());
                 waiting >= kMaxParkedLeasesPerWorker) {
        replies.emplace_back(
            std::move(done),
            Metrics().Reject(
                MetricRole::kCoordinator, "lease",
                LimitExceeded(
                    absl::StrCat("the number of waiting lease requests "
                                 "of worker ",
                                 request.worker_id()),
                    waiting + 1, kMaxParkedLeasesPerWorker)));
      } else {
        parked_.Park(request, std::move(done), Now() + options_.long_poll);
      }
      ServeWaiters(replies, false);
    }
  }
  ParkedCalls::Send(replies);
  FlushMetrics();  // async: the points of applied tasks
}

std::optional<absl::StatusOr<v1::NextTaskResponse>> Coordinator::TryAssign(
    const v1::NextTaskRequest& request) {
  const std::string& worker_id = request.worker_id();
  Member* member = membership_.Find(worker_id);
  if (member == nullptr) {
    return absl::StatusOr<v1::NextTaskResponse>(absl::NotFoundError(
        absl::StrCat("worker ", worker_id, " was evicted")));
  }
  if (!diverged_.empty() || !halted_.empty()) {
    return absl::StatusOr<v1::NextTaskResponse>(
        absl::FailedPreconditionError(diverged_.empty() ? halted_ : diverged_));
  }
  if (auto task = EvalTaskFor(*member)) {
    return absl::StatusOr<v1::NextTaskResponse>(std::move(*task));
  }
  if (evals_.training_done()) {
    // Ring members hold the only copy of the weights: keep them until the
    // final evaluation has fetched them.
    if (rules_.members_hold_weights() && !evals_.finished())
      return std::nullopt;
    return Action(v1::NextTaskResponse::FINISH, membership_.generation());
  }
  std::optional<v1::NextTaskResponse> response =
      rules_.sync()
          ? TryAssignSync(*member,
                          request.has_after_step() ? request.after_step() : -1,
                          request.fence())
          : TryAssignAsync(*member);
  if (!response) return std::nullopt;
  return absl::StatusOr<v1::NextTaskResponse>(std::move(*response));
}

std::optional<v1::NextTaskResponse> Coordinator::LeaseOpenSlot(
    Member& member, int64_t after_step, int64_t held_fence) {
  for (auto& [number, step] : steps_.open()) {
    const bool redo = step.fence > held_fence;  // formed again since that lease
    if ((number <= after_step && !redo) || step.finalizing) continue;
    for (size_t i = 0; i < step.slots.size(); ++i) {
      const Slot& slot = step.slots[i];
      if (slot.worker_id != member.id || slot.pushed) continue;
      v1::NextTaskResponse r =
          Action(v1::NextTaskResponse::TRAIN, membership_.generation());
      r.set_fence(recovery_state_.fence());
      r.set_committed_steps(CommittedSteps());
      r.set_step(number);
      r.set_pull_version(number);
      r.set_epoch(step.epoch);
      r.set_epoch_size(options_.epoch_size);
      for (const v1::DataTask& t : slot.tasks) *r.add_tasks() = t;
      // Pipeline replicas (PS mode too) are cut from the step's members.
      if (rules_.leases_name_members()) AddRing(step, i, r);
      if (step.checkpoint) r.set_checkpoint(true);
      if (step.restore.has_value()) r.set_restore_checkpoint(*step.restore);
      if (step.keep_state) {
        r.set_keep_state(true);
        std::vector<int64_t>& kept = member.kept_states;
        if (std::find(kept.begin(), kept.end(), number) == kept.end()) {
          kept.push_back(number);
          if (kept.size() > 2) kept.erase(kept.begin());
        }
      }
      if (LeaseNamesContributors(number)) {
        for (const Slot& s : step.slots) {
          // A ring member pushes nothing; a PS pipeline stage does.
          if (s.samples == 0 && !rules_.pushes_without_samples()) continue;
          v1::Contributor* c = r.add_step_contributors();
          c->set_worker_id(s.worker_id);
          c->set_num_samples(s.samples);
        }
      }
      return r;
    }
  }
  return std::nullopt;
}

std::optional<v1::NextTaskResponse> Coordinator::TryAssignSync(
    Member& member, int64_t after_step, int64_t held_fence) {
  if (auto r = LeaseOpenSlot(member, after_step, held_fence)) return r;
  if (!EnoughWorkers()) return std::nullopt;
  if (FormStep(after_step >= 0 ? 2 : 1))
    return LeaseOpenSlot(member, after_step, held_fence);
  return std::nullopt;
}

std::vector<std::string> Coordinator::PeerAddresses() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> addresses;
  for (const Member* m : membership_.Ranked())
    addresses.push_back(m->info.peer_address());
  return addresses;
}

std::optional<v1::NextTaskResponse> Coordinator::TryAssignAsync(
    Member& member) {
  // A worker re-asking without a report (a retried call) gets the same task.
  if (member.leases.empty()) {
    // A barrier is on its way (coordinator_async_barrier.cc): no new lease.
    if (recovery_state_.needed()) return std::nullopt;
    if (async_barriers() && async_checked_tasks_ < 0 && tasks_applied_ == 0) {
      // The job's start is the first consistent cut.
      recovery_state_.Require("job start");
      return std::nullopt;
    }
    if (!EnoughWorkers()) return std::nullopt;
    if (rules_.bounded_staleness()) {
      int64_t slowest = member.tasks_done;
      for (const auto& [id, m] : membership_.members())
        slowest = std::min(slowest, m.tasks_done);
      if (member.tasks_done > slowest + options_.job.staleness())
        return std::nullopt;
    }
    const int64_t share = std::max<int64_t>(
        1, options_.job.global_batch() / std::max(1, ActiveCount()));
    member.leases = queue_->Lease(share);
    if (member.leases.empty()) return std::nullopt;
  }
  v1::NextTaskResponse r =
      Action(v1::NextTaskResponse::TRAIN, membership_.generation());
  r.set_fence(recovery_state_.fence());
  r.set_step(member.tasks_done);
  r.set_pull_version(0);
  r.set_epoch(queue_->epoch());
  r.set_epoch_size(options_.epoch_size);
  for (const v1::DataTask& t : member.leases) *r.add_tasks() = t;
  return r;
}

void Coordinator::RemoveMember(const std::string& worker_id,
                               const std::string& why) {
  const Member* member = membership_.Find(worker_id);
  if (member == nullptr) return;
  const std::vector<v1::DataTask> leases = member->leases;
  membership_.Remove(worker_id);  // bumps the generation
  AddEvent(why, worker_id, steps_.formed(), 0, "");
  GiveBackEvals(worker_id);
  ForceCheckpointIfNoCopyLeft();
  for (const v1::DataTask& task : leases) {
    if (task.epoch() == queue_->epoch()) (void)queue_->Release(task.task_id());
  }
  if (rules_.lost_member_aborts_step()) {
    // Its ring (its pipeline replica, the shards' sums) cannot finish the
    // steps it has not reported: every member restarts the first of them
    // from the committed state.
    for (const auto& [number, step] : steps_.open()) {
      if (step.finalizing) continue;
      const bool unreported = std::any_of(
          step.slots.begin(), step.slots.end(),
          [&](const Slot& s) { return s.worker_id == worker_id && !s.pushed; });
      if (unreported) {
        AbortOpenSteps(number, false, absl::StrCat(worker_id, " ", why),
                       worker_id);
        break;
      }
    }
  }
  std::map<int64_t, OpenStep>& open = steps_.open();
  for (auto step_it = open.begin(); step_it != open.end();) {
    OpenStep& step = step_it->second;
    if (!step.finalizing) {
      auto& slots = step.slots;
      for (auto s = slots.begin(); s != slots.end();) {
        if (s->worker_id == worker_id && !s->pushed) {
          for (const v1::DataTask& t : s->tasks)
            (void)queue_->Release(t.task_id());
          s = slots.erase(s);
        } else {
          ++s;
        }
      }
      if (slots.empty() && step.step + 1 == steps_.formed()) {
        // Nobody left to compute the newest step: un-form it.
        steps_.set_formed(steps_.formed() - 1);
        step_it = open.erase(step_it);
        continue;
      }
      if (slots.empty()) {
        // Nobody left to push to this step, and later steps were formed
        // after it (prefetched leases): it cannot be finalized (a step
        // without contributors is no step), so it and the later ones are
        // formed again under a new fence. The shards drop what was pushed
        // for the later ones before any step forms.
        const int64_t number = step.step;
        AbortOpenSteps(number, /*include_finalizing=*/false,
                       absl::StrCat(worker_id, " ", why,
                                    ": no contributor left in step ", number),
                       worker_id);
        if (rules_.shards_apply_finalized_steps() &&
            !recovery_state_.needed()) {
          recovery_state_.Require(
              absl::StrCat("step ", number,
                           " lost every contributor: the shards drop the "
                           "pushes of the steps after it"));
        }
        break;
      }
      MaybeQueueFinalize(step);
    }
    ++step_it;
  }
  Persist();
}

void Coordinator::ServeWaiters(std::vector<Reply>& replies,
                               bool expire_all_due) {
  parked_.Serve(
      Now(), expire_all_due,
      [this](const v1::NextTaskRequest& request)
          -> std::optional<absl::StatusOr<v1::NextTaskResponse>> {
        mu_.AssertHeld();  // ServeWaiters' caller holds it
        if (!request.report_only()) return TryAssign(request);
        if (auto now = ReportAnswer(request)) return *std::move(now);
        return std::nullopt;
      },
      Waiting(), replies);
}

void Coordinator::EvaluatorLoop() {
  while (true) {
    EvalRequest request;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Coordinator* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
            return c->stopping_ || c->evals_.pending();
          },
          this));
      if (stopping_) return;
      request = evals_.Pop();
    }
    // An epoch end holds the next epoch's steps only until its weights are
    // fetched; the test-set pass runs while training goes on. A failed
    // fetch releases them too.
    const absl::Time eval_start = Now();
    const auto result = weights_->EvaluateAndNotify(request.version, [&] {
      if (request.holds_steps) ReleaseStepsHeldForEval();
    });
    if (request.holds_steps) ReleaseStepsHeldForEval();
    std::vector<Reply> replies;
    absl::MutexLock lock(&mu_);
    if (!result.ok() && !absl::IsUnimplemented(result.status())) {
      LogError("evaluation failed",
               {{"step", request.version}, {"error", result.status()}});
    }
    if (result.ok()) {
      v1::EvalPoint point = ToEvalPoint(*result);
      point.set_step(request.version);
      point.set_epoch(request.epoch);
      point.set_final(request.final);
      point.set_seconds(absl::ToDoubleSeconds(Now() - start_));
      point.set_duration_seconds(absl::ToDoubleSeconds(Now() - eval_start));
      evals_.AddResult(point);
      QueueEvalMetrics(point);
    }
    if (request.final) {
      // A model ferry does not score (UNIMPLEMENTED) is not a failure. A
      // worker's final evaluation may still be due (MaybeFinishJob).
      final_scored_ = result.ok() || absl::IsUnimplemented(result.status())
                          ? absl::OkStatus()
                          : result.status();
      MaybeFinishJob();
      ServeWaiters(replies, false);  // ring members parked for FINISH
    }
    mu_.Unlock();
    ParkedCalls::Send(replies);
    FlushMetrics();
    mu_.Lock();
  }
}

void Coordinator::ReleaseStepsHeldForEval() {
  std::vector<Reply> replies;
  {
    absl::MutexLock lock(&mu_);
    if (!evals_.ReleaseSteps()) return;
    ServeWaiters(replies, false);
  }
  ParkedCalls::Send(replies);
}

void Coordinator::ExpireTimeouts(std::vector<Reply>& replies) {
  for (const std::string& id :
       membership_.Expired(Now(), options_.heartbeat_timeout)) {
    RemoveMember(id, "evicted");
  }
  ServeWaiters(replies, /*expire_all_due=*/true);
}

void Coordinator::CheckTimeouts() {
  std::vector<Reply> replies;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    ExpireTimeouts(replies);
    SyncStateIfDue();
  }
  ParkedCalls::Send(replies);
}

void Coordinator::ReaperLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    // Real time: the reaper looks every 100 ms whatever options.clock says.
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(100));
    if (stopping_) break;
    std::vector<Reply> replies;
    ExpireTimeouts(replies);
    SyncStateIfDue();
    if (!replies.empty()) {
      mu_.Unlock();
      ParkedCalls::Send(replies);
      mu_.Lock();
    }
  }
}

}  // namespace ferry

#include "worker/hosted_worker.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "worker/grpc_worker_deps.h"

namespace ferry {

HostedWorker::HostedWorker(HostedWorkerOptions options)
    : options_(std::move(options)) {
  options_.worker.stop_requested = &stop_;
  options_.worker.device = DeviceChoice::kCpu;
  options_.worker.make_trainer = [this](const v1::JobSpec& job) {
    return MakeTrainer(job);
  };
}

absl::StatusOr<std::unique_ptr<HostedWorker>> HostedWorker::Start(
    HostedWorkerOptions options) {
  if (options.worker.coordinator_address.empty()) {
    return absl::InvalidArgumentError("no coordinator address");
  }
  auto worker =
      std::unique_ptr<HostedWorker>(new HostedWorker(std::move(options)));
  if (worker->options_.shard.enabled()) {
    ASSIGN_OR_RETURN(
        worker->shard_,
        StartHostedShards(worker->options_.shard, worker->options_.worker));
  }
  ASSIGN_OR_RETURN(WorkerDeps deps, worker->MakeDeps());
  worker->thread_ =
      std::thread([w = worker.get(), d = std::move(deps)]() mutable {
        w->Run(std::move(d));
      });
  return worker;
}

HostedWorker::~HostedWorker() {
  (void)Stop();
  (void)StopShard();
}

absl::StatusOr<WorkerDeps> HostedWorker::MakeDeps() {
  if (!shard_.has_value()) return MakeGrpcWorkerDeps(options_.worker);
  return MakeGrpcWorkerDeps(options_.worker, shard_->Shards(),
                            shard_->shaper.get());
}

void HostedWorker::RequestStop() {
  stop_.store(true);
  absl::MutexLock lock(&stop_request_mu_);
  stop_request_ = true;
}

bool HostedWorker::AwaitStopRequest(absl::Duration timeout) {
  absl::MutexLock lock(&stop_request_mu_);
  return stop_request_mu_.AwaitWithTimeout(absl::Condition(&stop_request_),
                                           timeout);
}

absl::Status HostedWorker::StopShard() {
  {
    absl::MutexLock lock(&mu_);
    if (!shard_.has_value() || shard_stopped_) return absl::OkStatus();
    shard_stopped_ = true;
  }
  LogInfo("PS shard shutting down", {{"shard", options_.shard.process_id}});
  return shard_->host->Stop();
}

absl::StatusOr<std::unique_ptr<LeaseTrainer>> HostedWorker::MakeTrainer(
    const v1::JobSpec& job) {
  std::shared_ptr<HostedBuffers> buffers;
  {
    // A member registered again after an eviction: the host's model lives
    // in the buffers it already has (PS pulls and the ring's broadcast give
    // them the job's current state).
    absl::MutexLock lock(&mu_);
    if (joined_.has_value() && joined_->job.job_id() == job.job_id()) {
      buffers = joined_->buffers;
    }
  }
  if (buffers == nullptr) {
    ASSIGN_OR_RETURN(buffers, HostedBuffers::ForJob(
                                  job, options_.worker.coordinator_address));
  }
  auto trainer = std::make_unique<HostedLeaseTrainer>(job, buffers, &channel_);
  absl::MutexLock lock(&mu_);
  joined_ = HostedJob{.job = job, .buffers = std::move(buffers)};
  return trainer;
}

void HostedWorker::Run(WorkerDeps deps) {
  absl::StatusOr<WorkerSummary> result =
      RunDistributedWorker(options_.worker, std::move(deps));
  for (int rejoins = 0; !result.ok() && IsEviction(result.status()) &&
                        rejoins < options_.worker.max_rejoins && !stop_.load();
       ++rejoins) {
    LogWarn("evicted: registering again as a new member",
            {{"error", result.status()},
             {"rejoin", rejoins + 1},
             {"max_rejoins", options_.worker.max_rejoins}});
    // Fresh deps: the old peer server and channels go with the evicted
    // member.
    absl::StatusOr<WorkerDeps> fresh = MakeDeps();
    if (!fresh.ok()) {
      result = fresh.status();
      break;
    }
    result = RunDistributedWorker(options_.worker, *std::move(fresh));
  }
  channel_.End(result.ok() ? absl::OkStatus() : result.status());
  absl::MutexLock lock(&mu_);
  result_ = std::move(result);
}

absl::StatusOr<HostedJob> HostedWorker::Joined(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const auto joined_or_ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return joined_.has_value() || result_.has_value();
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&joined_or_ended), timeout)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "the worker did not join within ", absl::FormatDuration(timeout)));
  }
  if (joined_.has_value()) return *joined_;
  if (!result_->ok()) return result_->status();
  return absl::FailedPreconditionError(
      "the worker ended before it joined the job");
}

absl::StatusOr<WorkerSummary> HostedWorker::Stop() {
  stop_.store(true);
  channel_.Close();
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mu_);
  if (!result_.has_value()) {
    return absl::FailedPreconditionError("the worker never started");
  }
  return *result_;
}

}  // namespace ferry

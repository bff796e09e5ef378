#include "worker/distributed_worker.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/backoff.h"
#include "common/gradient_codec.h"
#include "common/log.h"
#include "common/sharding.h"
#include "common/status_macros.h"
#include "coordinator/coordinator_client.h"
#include "data/batch_stager.h"
#include "data/data_source.h"
#include "model/mlp.h"
#include "proto/health.h"
#include "proto/job_convert.h"
#include "ring/ring_peer_service.h"
#include "worker/job_options.h"
#include "worker/lease_samples.h"
#include "worker/ring_exchange.h"
#include "worker/worker_metrics.h"

namespace ferry {
namespace {

constexpr int kMaxConsecutiveFailures = 10;
constexpr int kMaxConsecutiveRingFailures = 60;
constexpr int64_t kLogEverySteps = 50;
// Deadline of the ShardInfo calls that tell waiting from failing.
constexpr absl::Duration kShardCheckTimeout = absl::Seconds(2);

void Log(const std::string& line) { LogInfo(line); }

// Failures after which the worker gives the step up and asks for the next.
bool IsStepRetriable(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) ||
         absl::IsAborted(s) || absl::IsFailedPrecondition(s) ||
         absl::IsAlreadyExists(s) || absl::IsCancelled(s);
}

double Seconds(absl::Time since) {
  return absl::ToDoubleSeconds(absl::Now() - since);
}

void AddBytes(const std::string& role, const TransferBytes& bytes,
              v1::ByteCounts* out) {
  (*out->mutable_sent())[role] = bytes.sent;
  (*out->mutable_received())[role] = bytes.received;
  if (bytes.calls > 0) (*out->mutable_calls())[role] = bytes.calls;
}

class Worker {
 public:
  explicit Worker(const WorkerOptions& options) : options_(options) {}
  ~Worker() {
    if (options_.health != nullptr && peer_ != nullptr) {
      options_.health->Detach(peer_->server.get());
    }
  }

  absl::StatusOr<WorkerSummary> Run() {
    const absl::Time start = absl::Now();
    if (absl::Status joined = Join(); !joined.ok()) {
      if (!stop_requested()) return joined;
      summary_.end_reason = "stopped";  // asked to stop while registering
      return summary_;
    }
    absl::Status status = Setup();
    if (status.ok() && ring_ != nullptr) {
      // The coordinator aborted open steps: give up a ring step in flight
      // at once instead of waiting for its collective deadline.
      RingExchange* ring = ring_.get();
      heartbeater_->SetFenceListener(
          [ring](int64_t fence) { ring->CancelIfOlder(fence); });
    }
    if (status.ok()) status = Loop();
    if (status.ok() && !options_.final_weights_path.empty()) {
      status = SaveFinalWeights();
    }
    heartbeater_->SetFenceListener(nullptr);
    heartbeater_->Stop();
    if (!absl::IsNotFound(status)) {  // an evicted worker is unknown already
      v1::LeaveRequest leave;
      leave.set_worker_id(worker_id_);
      const absl::Status left = coordinator_->Leave(leave);
      if (!left.ok()) Log(absl::StrCat("leave failed: ", left.ToString()));
    }
    if (!status.ok()) return status;
    if (ps_ != nullptr) summary_.ps_bytes = ps_->bytes();
    summary_.peer_bytes = peer_->counter->Get();
    summary_.coordinator_bytes = coordinator_->bytes();
    summary_.link = options_.link;
    if (shaper_ != nullptr) summary_.link_stats = shaper_->stats();
    summary_.wall_seconds = Seconds(start);
    return summary_;
  }

 private:
  bool stop_requested() const {
    return options_.stop_requested != nullptr &&
           options_.stop_requested->load();
  }

  // Starts the peer service, registers and starts heartbeats.
  absl::Status Join() {
    if (options_.link.enabled()) {
      shaper_ = std::make_unique<LinkShaper>(options_.link);
      Log(absl::StrCat("link emulation: ", options_.link.ToString(),
                       " per direction, burst ", shaper_->burst_bytes(),
                       " bytes"));
    }
    ASSIGN_OR_RETURN(peer_, StartRingPeerServer(options_.peer_listen_address,
                                                shaper_.get()));
    if (options_.health != nullptr) {
      options_.health->Attach(peer_->server.get(), {"ferry.v1.RingPeer"});
    }
    const std::string peer_address =
        AdvertisedPeerAddress(options_.peer_listen_address,
                              options_.peer_advertise_address, peer_->port);
    CoordinatorClientOptions copts;
    copts.rpc_timeout = options_.rpc_timeout;
    copts.short_timeout = std::min(options_.rpc_timeout, absl::Seconds(5));
    copts.retry = options_.retry;
    copts.cancel = options_.stop_requested;
    coordinator_ =
        CoordinatorClient::Connect(options_.coordinator_address, copts);
    v1::RegisterRequest request;
    request.set_peer_address(peer_address);
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    request.set_hostname(host);
    request.set_pid(getpid());
    absl::StatusOr<v1::RegisterResponse> reg = coordinator_->Register(request);
    if (!reg.ok()) {
      return absl::Status(reg.status().code(),
                          absl::StrCat("register with coordinator ",
                                       options_.coordinator_address, ": ",
                                       reg.status().message()));
    }
    job_ = reg->job();
    worker_id_ = reg->worker_id();
    peer_->service->set_job_id(job_.job_id());
    summary_.worker_id = worker_id_;
    summary_.job_id = job_.job_id();
    const int64_t interval_ms = reg->heartbeat_interval_ms();
    const absl::Duration interval = absl::Milliseconds(
        interval_ms > 0 ? std::max<int64_t>(interval_ms, 50) : 1000);
    heartbeater_ = std::make_unique<Heartbeater>(coordinator_.get(), worker_id_,
                                                 reg->generation(), interval);
    Log(
        absl::StrFormat("registered with %s as %s: job %s, generation %d, "
                        "model %s, %s, %d shards, peer service at %s",
                        options_.coordinator_address, worker_id_, job_.job_id(),
                        reg->generation(), job_.model(), job_.dataset(),
                        job_.shard_addresses_size(), peer_address));
    return absl::OkStatus();
  }

  // Checks the job, then loads data and builds backend, model, buffers and
  // the PS client.
  absl::Status Setup() {
    if (!ring() && job_.shard_addresses_size() == 0) {
      return absl::FailedPreconditionError(
          "the job lists no parameter-server shards");
    }
    ASSIGN_OR_RETURN(std::vector<int> sizes, ParseMlpSpec(job_.model()));
    ASSIGN_OR_RETURN(backend_, MakeBackend(options_.device, options_.threads));
    summary_.device = backend_->Name();
    ASSIGN_OR_RETURN(Mlp model, Mlp::Create(sizes, backend_.get()));
    model_.emplace(std::move(model));
    RETURN_IF_ERROR(CheckJobTensors(job_, model_->layout()));
    ASSIGN_OR_RETURN(data_, LoadTrainTest(job_.dataset(), job_.data_dir(),
                                          model_->input_dim(),
                                          model_->num_classes(), job_.seed()));
    lease_samples_.emplace(data_.train.num_samples, job_.seed());
    const int64_t n = model_->layout().total_elements();
    ASSIGN_OR_RETURN(params_, backend_->Allocate(n));
    ASSIGN_OR_RETURN(grads_, backend_->Allocate(n));
    if (!backend_->IsHostMemory()) {
      ASSIGN_OR_RETURN(host_params_, backend_->AllocateHost(n));
      ASSIGN_OR_RETURN(host_grads_, backend_->AllocateHost(n));
    }
    if (ring()) {
      RingExchangeOptions ropts =
          RingExchangeOptionsForJob(job_, worker_id_, model_->layout());
      ropts.backend = backend_.get();
      ropts.peer = peer_.get();
      ropts.params = params_.data();
      ropts.grads = grads_.data();
      ropts.host_grads =
          backend_->IsHostMemory() ? grads_.data() : host_grads_.data();
      ropts.collective_timeout = options_.collective_timeout;
      ASSIGN_OR_RETURN(ring_, RingExchange::Create(std::move(ropts)));
      const std::vector<float> init = model_->InitialParameters(job_.seed());
      RETURN_IF_ERROR(backend_->CopyToDevice(init.data(), n, params_.data()));
      Log(absl::StrFormat(
          "%d parameters, %d train samples, device %s, ring mode, "
          "%d gradient buckets",
          n, data_.train.num_samples, summary_.device, ring_->num_buckets()));
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(
        GrpcParameterClientOptions popts,
        ParameterClientOptionsForJob(job_, worker_id_, model_->layout()));
    popts.rpc_timeout = options_.rpc_timeout;
    popts.retry = options_.retry;
    popts.shaper = shaper_.get();
    ASSIGN_OR_RETURN(ps_, GrpcParameterClient::Create(std::move(popts)));
    Log(absl::StrFormat("%d parameters, %d train samples, device %s", n,
                        data_.train.num_samples, summary_.device));
    return absl::OkStatus();
  }

  // A NextTask call running on its own thread.
  struct PendingLease {
    std::future<absl::StatusOr<v1::NextTaskResponse>> result;
    std::optional<v1::StepReport> report;  // sent with it
    absl::Time asked;
  };

  void Ask(std::optional<v1::StepReport> report,
           std::optional<int64_t> after_step) {
    v1::NextTaskRequest request;
    request.set_worker_id(worker_id_);
    request.set_generation(heartbeater_->generation());
    if (report.has_value()) *request.mutable_done() = *report;
    if (after_step.has_value()) {
      request.set_after_step(*after_step);
      request.set_fence(held_fence_);
    }
    pending_.emplace();
    pending_->report = std::move(report);
    pending_->asked = absl::Now();
    pending_->result = std::async(std::launch::async, [this, request] {
      return coordinator_->NextTask(request);
    });
  }

  // Waits for the pending call, publishing weights meanwhile (ring mode:
  // the coordinator's evaluation may be what the coordinator waits for).
  absl::StatusOr<v1::NextTaskResponse> AwaitLease() {
    while (pending_->result.wait_for(std::chrono::milliseconds(20)) !=
           std::future_status::ready) {
      PublishWeights();
    }
    return pending_->result.get();
  }

  void PublishWeights() {
    if (ring_ == nullptr) return;
    const absl::Status published = ring_->PublishIfWanted();
    if (!published.ok())
      Log(absl::StrCat("publish weights: ", published.ToString()));
  }

  // Waits for the report sent last (if any) and returns its status.
  absl::Status AwaitReport() {
    if (!report_in_flight_.valid()) return absl::OkStatus();
    return report_in_flight_.get();
  }

  // Sync mode, prefetching: the step's report goes out on its own at once.
  absl::Status SendReport(const v1::StepReport& report) {
    v1::NextTaskRequest request;
    request.set_worker_id(worker_id_);
    request.set_generation(heartbeater_->generation());
    *request.mutable_done() = report;
    request.set_report_only(true);
    absl::Status status;
    for (int attempt = 0; attempt < 3; ++attempt) {
      status = coordinator_->NextTask(request).status();
      if (!absl::IsDeadlineExceeded(status)) break;
    }
    if (absl::IsAborted(status)) {  // the step went on without us
      Log(absl::StrCat("report of step ", report.step(),
                       " refused: ", status.ToString()));
      return absl::OkStatus();
    }
    return status;
  }

  // Sync mode leases are prefetched: while a step runs, the lease of the
  // next one is already asked for, and each report goes out on its own as
  // soon as the step is done, so no step waits for a coordinator round trip.
  absl::Status Loop() {
    const bool prefetch = job_.consistency() == v1::CONSISTENCY_SYNC;
    std::optional<v1::StepReport> done;  // not yet sent
    std::optional<int64_t> last_step;    // leased, when prefetching
    int failures = 0;
    // Ring failures wait for the coordinator to evict a dead member.
    Backoff ring_backoff(RetryPolicy{.initial_backoff = absl::Milliseconds(100),
                                     .max_backoff = absl::Seconds(1),
                                     .budget = absl::InfiniteDuration()});
    while (true) {
      if (heartbeater_->evicted()) return Evicted();
      const bool stopping = stop_requested();
      if (!pending_.has_value()) {
        if (stopping && !done.has_value()) break;
        PublishWeights();
        Ask(std::move(done), prefetch ? last_step : std::nullopt);
        done.reset();
      }
      absl::StatusOr<v1::NextTaskResponse> lease = AwaitLease();
      std::optional<v1::StepReport> sent = std::move(pending_->report);
      const absl::Time asked = pending_->asked;
      pending_.reset();
      if (absl::IsNotFound(lease.status())) return Evicted();
      if (stopping)
        break;  // the last report went out; Leave releases any new lease
      if (absl::IsAborted(lease.status()))
        continue;  // a step we are no longer part of
      if (absl::IsDeadlineExceeded(lease.status()) &&
          ++failures < kMaxConsecutiveFailures) {
        done = std::move(sent);  // may not have arrived
        continue;
      }
      if (!lease.ok()) return lease.status();
      heartbeater_->ObserveGeneration(lease->generation());
      if (lease->action() == v1::NextTaskResponse::FINISH) {
        summary_.end_reason = "finished";
        break;
      }
      if (lease->action() == v1::NextTaskResponse::WAIT) {
        // The coordinator long-polls; do not spin if it answered at once.
        absl::SleepFor(absl::Milliseconds(100) - (absl::Now() - asked));
        continue;
      }
      if (prefetch) {
        last_step = lease->step();
        held_fence_ = lease->fence();
        Ask(std::nullopt, last_step);
      }
      absl::StatusOr<v1::StepReport> report =
          ring() && lease->fence() < heartbeater_->fence()
              ? absl::AbortedError("the lease predates an abort (older fence)")
              : Train(*lease);
      if (!report.ok()) {
        if (ring_ != nullptr) {
          // Every member restarts the step from the committed state.
          ring_->Abandon();
          RETURN_IF_ERROR(AwaitReport());
          v1::StepReport failed;
          failed.set_step(lease->step());
          failed.set_fence(lease->fence());
          failed.set_failed(true);
          (void)SendReport(failed);
        }
        if (pending_.has_value()) {  // drop the prefetched lease: redo this
                                     // step first
          (void)AwaitLease();
          pending_.reset();
        }
        last_step.reset();
        if (!IsStepRetriable(report.status())) return report.status();
        ++summary_.abandoned_steps;
        Log(absl::StrCat("abandoned step ", lease->step(), ": ",
                         report.status().ToString()));
        // A step closed without us (a sync quorum cut the straggler) is
        // expected, not a fault: it does not count towards giving up.
        const bool closed_without_us =
            absl::IsFailedPrecondition(report.status()) ||
            absl::IsAlreadyExists(report.status());
        // A sync step waits for all its contributors: a call that ran out
        // of time while every shard answers waited for another worker (one
        // cut off from a shard, say), it did not fail here. It does not
        // count either, so that the workers that reach every shard outlast
        // the one that does not, which gives up and leaves (its slot is
        // dropped and the step completes without it). Counting it made the
        // healthy workers exit first (tests/fault/network_partition_test.py).
        const bool waited_for_others =
            !ring() && absl::IsDeadlineExceeded(report.status()) &&
            ps_->CheckShards(std::min(options_.rpc_timeout, kShardCheckTimeout))
                .ok();
        // A ring keeps failing until the coordinator evicts a dead member
        // (a heartbeat timeout): back off and wait for it, up to about a
        // minute of failures in a row.
        const int limit =
            ring() ? kMaxConsecutiveRingFailures : kMaxConsecutiveFailures;
        if (!closed_without_us && !waited_for_others && ++failures >= limit) {
          return report.status();
        }
        if (ring()) ring_backoff.Wait();
        continue;
      }
      failures = 0;
      ring_backoff.Reset();
      if (prefetch) {
        // The report travels while the next step runs; one at a time.
        RETURN_IF_ERROR(AwaitReport());
        report_in_flight_ = std::async(
            std::launch::async,
            [this, r = *std::move(report)] { return SendReport(r); });
        if (stop_requested()) {
          RETURN_IF_ERROR(AwaitReport());
          if (pending_.has_value()) {
            (void)AwaitLease();
            pending_.reset();
          }
          break;
        }
      } else {
        done = *std::move(report);
      }
    }
    RETURN_IF_ERROR(AwaitReport());
    if (summary_.end_reason.empty()) summary_.end_reason = "stopped";
    Log(absl::StrFormat("%s after %d steps (%d samples, %d abandoned); leaving",
                        summary_.end_reason, summary_.steps, summary_.samples,
                        summary_.abandoned_steps));
    return absl::OkStatus();
  }

  absl::Status Evicted() const {
    return absl::NotFoundError(
        absl::StrCat("worker ", worker_id_, " was evicted by coordinator ",
                     options_.coordinator_address,
                     " (missed heartbeats or removed); it stops without "
                     "finishing its step"));
  }

  bool ring() const { return job_.mode() == v1::MODE_RING; }

  // Writes the weights the worker ends with (ring: its own; PS: the
  // shards' newest) as raw little-endian fp32, atomically.
  absl::Status SaveFinalWeights() {
    const int64_t n = model_->layout().total_elements();
    std::vector<float> host(n);
    if (ring()) {
      RETURN_IF_ERROR(backend_->CopyToHost(params_.data(), n, host.data()));
    } else {
      RETURN_IF_ERROR(ps_->Pull(0, host.data()).status());
    }
    const std::string& path = options_.final_weights_path;
    const std::string temp = path + ".tmp";
    std::FILE* f = std::fopen(temp.c_str(), "wb");
    bool ok = f != nullptr && std::fwrite(host.data(), sizeof(float),
                                          host.size(), f) == host.size();
    if (f != nullptr) ok = (std::fclose(f) == 0) && ok;
    if (!ok || std::rename(temp.c_str(), path.c_str()) != 0) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot write the final weights to ", path));
    }
    Log(absl::StrFormat("wrote %d final weights to %s", n, path));
    return absl::OkStatus();
  }

  // One TRAIN lease: bring the weights up to date (PS: pull; ring: join the
  // ring), forward + backward with the gradient exchange overlapped (PS:
  // push; ring: bucket all-reduce), finish the exchange (ring: apply the
  // optimizer).
  absl::StatusOr<v1::StepReport> Train(const v1::NextTaskResponse& lease) {
    ASSIGN_OR_RETURN(std::vector<int64_t> indices,
                     lease_samples_->Indices(lease, /*allow_empty=*/ring()));
    const int batch = static_cast<int>(indices.size());
    const int64_t n = model_->layout().total_elements();
    const absl::Time compute_start = absl::Now();
    if (!stager_.has_value() || stager_max_ < batch) {
      stager_max_ = std::max({batch, job_.global_batch(), 1});
      ASSIGN_OR_RETURN(BatchStager stager,
                       BatchStager::Create(backend_.get(), model_->input_dim(),
                                           stager_max_));
      stager_.emplace(std::move(stager));
    }
    if (batch > 0) RETURN_IF_ERROR(stager_->Stage(data_.train, indices));
    double compute = Seconds(compute_start);

    const absl::Time prepare_start = absl::Now();
    std::unique_ptr<PushSession> push;
    if (ring()) {
      RETURN_IF_ERROR(ring_->BeginStep(lease));
    } else {
      float* pull_target =
          backend_->IsHostMemory() ? params_.data() : host_params_.data();
      ASSIGN_OR_RETURN(const int64_t version,
                       ps_->Pull(lease.pull_version(), pull_target));
      if (!backend_->IsHostMemory()) {
        RETURN_IF_ERROR(
            backend_->CopyToDevice(host_params_.data(), n, params_.data()));
      }
      PushInfo info;
      info.generation = lease.generation() > 0 ? lease.generation()
                                               : heartbeater_->generation();
      info.step = lease.step();
      info.num_samples = batch;
      info.base_version = version;
      ASSIGN_OR_RETURN(push, ps_->BeginPush(info));
    }
    double comm = Seconds(prepare_start);

    float* host_grads =
        backend_->IsHostMemory() ? grads_.data() : host_grads_.data();
    absl::Status ready_status;
    const auto on_ready = [&](int64_t offset, int64_t length) {
      if (!ready_status.ok()) return;
      if (backend_->IsHostMemory()) {
        ready_status = backend_->Synchronize();
      } else {
        ready_status = backend_->CopyToHost(grads_.data() + offset, length,
                                            host_grads + offset);
      }
      if (!ready_status.ok()) return;
      ready_status = ring() ? ring_->Ready(offset, length)
                            : push->Ready(offset, length, host_grads + offset);
    };
    const absl::Time backward_start = absl::Now();
    LossStats stats;
    if (batch > 0) {
      ASSIGN_OR_RETURN(
          stats, model_->ForwardBackward(params_.data(), stager_->inputs(),
                                         stager_->labels(), batch,
                                         /*grad_scale=*/1.0f, grads_.data(),
                                         on_ready));
    } else {  // a ring rank without samples contributes zeros
      std::fill(host_grads, host_grads + n, 0.0f);
      ready_status = ring_->Ready(0, n);
    }
    RETURN_IF_ERROR(ready_status);
    compute += Seconds(backward_start);
    const absl::Time finish_start = absl::Now();
    RETURN_IF_ERROR(ring() ? ring_->FinishStep() : push->Finish());
    comm += Seconds(finish_start);

    ++summary_.steps;
    summary_.samples += batch;
    summary_.loss_sum += stats.loss_sum;
    summary_.correct += stats.correct;
    summary_.compute_seconds += compute;
    summary_.comm_seconds += comm;
    v1::StepReport report;
    report.set_step(lease.step());
    report.set_fence(lease.fence());
    if (lease.tasks_size() > 0) report.set_task_id(lease.tasks(0).task_id());
    report.set_loss_sum(stats.loss_sum);
    report.set_correct(stats.correct);
    report.set_num_samples(batch);
    report.set_compute_seconds(compute);
    report.set_comm_seconds(comm);
    if (ring() && job_.digest_every() > 0 &&
        ring_->steps_applied() % job_.digest_every() == 0) {
      ASSIGN_OR_RETURN(const uint64_t digest, ring_->WeightsDigest());
      report.set_weights_digest(digest);
    }
    if (ps_ != nullptr) {
      AddBytes("ps", ps_->bytes(), report.mutable_bytes());
      for (const auto& [peer, bytes] : ps_->peer_bytes()) {
        AddBytes(peer, bytes, report.mutable_peer_bytes());
      }
    }
    if (ring()) AddBytes(kRingPeerRole, ring_->bytes(), report.mutable_bytes());
    AddBytes("coordinator", coordinator_->bytes(), report.mutable_bytes());
    step_metrics_.Record(batch, heartbeater_->generation(), report.bytes());
    if (summary_.steps % kLogEverySteps == 0) {
      Log(absl::StrFormat(
          "step %d (epoch %d): loss %.4f, compute %.3f s, comm %.3f s",
          lease.step(), lease.epoch(), batch > 0 ? stats.loss_sum / batch : 0.0,
          compute, comm));
    }
    return report;
  }

  const WorkerOptions& options_;
  // Link emulation (null: none). Declared first: outlives the peer server
  // and the PS client, whose held messages it may still release.
  std::unique_ptr<LinkShaper> shaper_;
  std::unique_ptr<CoordinatorClient> coordinator_;
  std::unique_ptr<Heartbeater> heartbeater_;
  std::unique_ptr<RingPeerServer> peer_;
  std::unique_ptr<ParameterClient> ps_;  // PS mode
  std::unique_ptr<RingExchange> ring_;   // ring mode
  v1::JobSpec job_;
  std::string worker_id_;
  std::unique_ptr<ComputeBackend> backend_;
  std::optional<Mlp> model_;
  TrainTestData data_;
  DeviceBuffer params_, grads_;  // backend memory
  DeviceBuffer host_params_,
      host_grads_;  // pinned staging, non-host backends only
  std::optional<BatchStager> stager_;
  int stager_max_ = 0;
  std::optional<LeaseSamples> lease_samples_;
  std::optional<PendingLease> pending_;
  std::future<absl::Status> report_in_flight_;
  int64_t held_fence_ = 0;  // fence of the lease being trained (prefetching)
  WorkerSummary summary_;
  WorkerStepMetrics step_metrics_;
};

}  // namespace

absl::StatusOr<WorkerSummary> RunDistributedWorker(
    const WorkerOptions& options) {
  if (options.coordinator_address.empty()) {
    return absl::InvalidArgumentError("no coordinator address");
  }
  if (options.threads < 1 || options.rpc_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("threads and rpc timeout must be > 0");
  }
  Worker worker(options);
  return worker.Run();
}

}  // namespace ferry

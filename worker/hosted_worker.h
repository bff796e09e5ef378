// HostedWorker: a distributed worker (worker/distributed_worker.h) whose
// gradients its host program computes: the Python bindings' `ferry.torch`
// (python/) run one per training process. The worker's loop, heartbeats,
// exchanges (PS, ring) and ring peer service run on threads of their own,
// over gRPC as in ferry-worker; the host trains the leases through
// channel() (worker/host_step_channel.h) with the buffers of Joined().
//
//   HostedWorker::Start(options)   registers with the coordinator
//   Joined()                       the job and the flat buffers
//   channel().NextLease / Ready / Finish ... per step
//   Stop()                         leaves the job; the summary
//   AwaitStopRequest / StopShard   a process hosting a shard serves it
//                                  after training, until asked to stop
//
// An evicted worker (paused past the heartbeat timeout: a stopped process,
// a frozen VM) registers again as a new member, up to
// WorkerOptions::max_rejoins times, as ferry-worker does: same buffers and
// channel, so the host's model and loop carry on (its open step, if any,
// is not applied; the next lease is the new member's).
//
// Thread safety: all methods are thread-safe.
#ifndef FERRY_WORKER_HOSTED_WORKER_H_
#define FERRY_WORKER_HOSTED_WORKER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ferry/v1/common.pb.h"
#include "worker/distributed_worker.h"
#include "worker/host_step_channel.h"
#include "worker/hosted_lease_trainer.h"
#include "worker/hosted_shard.h"

namespace ferry {

struct HostedWorkerOptions {
  // The coordinator, timeouts, peer addresses; device, threads and
  // make_trainer are the hosted worker's own.
  WorkerOptions worker;
  // A PS shard process of the job this process also serves (colocated
  // shard, worker/hosted_shard.h); started before the worker registers,
  // once the job's model is defined.
  HostedShardFlags shard;
};

// What the host trains with once the worker joined.
struct HostedJob {
  v1::JobSpec job;
  // Shared with the worker; the host's model keeps its parameters and
  // gradients in them, so they outlive the worker.
  std::shared_ptr<HostedBuffers> buffers;
};

class HostedWorker {
 public:
  // Starts the hosted shard, if any, then the worker's thread, which
  // registers with the coordinator. INVALID_ARGUMENT without a coordinator
  // address; UNAVAILABLE when the peer service cannot listen;
  // StartHostedShards's errors.
  static absl::StatusOr<std::unique_ptr<HostedWorker>> Start(
      HostedWorkerOptions options);
  ~HostedWorker();  // Stop()

  // Waits until the worker joined the job and built its buffers. Errors:
  // the worker's (Register refused, coordinator unreachable, a job this
  // worker cannot train); DEADLINE_EXCEEDED after `timeout`.
  absl::StatusOr<HostedJob> Joined(absl::Duration timeout);
  HostStepChannel& channel() { return channel_; }
  // Any thread (a signal handler's): the worker leaves after the step in
  // flight, as ferry-worker does on SIGTERM: its report goes out, a lease
  // fetched ahead is released, the host's next NextLease gets nullopt.
  void RequestStop();
  // Leaves the job (a step in flight is given up) and waits for the
  // worker's thread. Returns the worker's summary or error. Idempotent.
  // A hosted shard goes on serving (other workers and the coordinator still
  // use it after this worker's training) until StopShard().
  absl::StatusOr<WorkerSummary> Stop();

  bool hosts_shard() const { return shard_.has_value(); }
  // Waits up to `timeout` for RequestStop(); whether it came.
  bool AwaitStopRequest(absl::Duration timeout);
  // Stops serving the hosted shard after writing its checkpoint (later
  // pushes are refused, so nothing is applied after it). OK without one.
  // Idempotent.
  absl::Status StopShard();

 private:
  explicit HostedWorker(HostedWorkerOptions options);
  absl::StatusOr<std::unique_ptr<LeaseTrainer>> MakeTrainer(
      const v1::JobSpec& job);
  // The gRPC deps, calling the hosted shard in the process.
  absl::StatusOr<WorkerDeps> MakeDeps();
  void Run(WorkerDeps deps);

  HostedWorkerOptions options_;
  std::atomic<bool> stop_{false};
  // The hosted shard; outlives the worker's thread, whose PS client calls
  // it in the process.
  std::optional<HostedShards> shard_;
  absl::Mutex stop_request_mu_;
  bool stop_request_ ABSL_GUARDED_BY(stop_request_mu_) = false;
  HostStepChannel channel_;
  absl::Mutex mu_;
  std::optional<HostedJob> joined_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::StatusOr<WorkerSummary>> result_ ABSL_GUARDED_BY(mu_);
  bool shard_stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ferry

#endif  // FERRY_WORKER_HOSTED_WORKER_H_

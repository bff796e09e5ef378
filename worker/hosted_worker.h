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

namespace ferry {

struct HostedWorkerOptions {
  // The coordinator, timeouts, peer addresses; device, threads and
  // make_trainer are the hosted worker's own.
  WorkerOptions worker;
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
  // Starts the worker's thread, which registers with the coordinator.
  // INVALID_ARGUMENT without a coordinator address; UNAVAILABLE when the peer
  // service cannot listen.
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
  void RequestStop() { stop_.store(true); }
  // Leaves the job (a step in flight is given up) and waits for the
  // worker's thread. Returns the worker's summary or error. Idempotent.
  absl::StatusOr<WorkerSummary> Stop();

 private:
  explicit HostedWorker(HostedWorkerOptions options);
  absl::StatusOr<std::unique_ptr<LeaseTrainer>> MakeTrainer(
      const v1::JobSpec& job);
  void Run(WorkerDeps deps);

  HostedWorkerOptions options_;
  std::atomic<bool> stop_{false};
  HostStepChannel channel_;
  absl::Mutex mu_;
  std::optional<HostedJob> joined_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::StatusOr<WorkerSummary>> result_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace ferry

#endif  // FERRY_WORKER_HOSTED_WORKER_H_

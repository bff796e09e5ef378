// The worker's side of ferry.v1.Coordinator: a thin wrapper over the stub
// that puts a deadline on every call, retries UNAVAILABLE where that is safe,
// converts statuses and counts bytes; plus the heartbeat thread.
#ifndef FERRY_COORDINATOR_COORDINATOR_CLIENT_H_
#define FERRY_COORDINATOR_COORDINATOR_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/backoff.h"
#include "common/byte_counter.h"
#include "coordinator/coordinator_api.h"
#include "ferry/v1/coordinator.grpc.pb.h"

namespace ferry {

struct CoordinatorClientOptions {
  // Register and NextTask (which long-polls for about a second).
  absl::Duration rpc_timeout = absl::Seconds(30);
  // Heartbeat and Leave: short, so that a dead coordinator is noticed.
  absl::Duration short_timeout = absl::Seconds(5);
  // Applied to UNAVAILABLE from Register and NextTask (a coordinator
  // restarting); Heartbeat and Leave are not retried.
  RetryPolicy retry;
  // When set (not owned), retries stop early and return the last error.
  const std::atomic<bool>* cancel = nullptr;
};

// The gRPC implementation of CoordinatorApi.
// Thread safety: every method may be called from several threads at once.
// Errors are the coordinator's (see coordinator.proto), or UNAVAILABLE /
// DEADLINE_EXCEEDED from the transport.
class CoordinatorClient final : public CoordinatorApi {
 public:
  // `stub` may be a real stub or a MockCoordinatorStub.
  CoordinatorClient(std::unique_ptr<v1::Coordinator::StubInterface> stub,
                    CoordinatorClientOptions options);
  // A client over MakeChannel(address); connects lazily.
  static std::unique_ptr<CoordinatorClient> Connect(
      const std::string& address, CoordinatorClientOptions options);

  // FAILED_PRECONDITION (other job, job finished), RESOURCE_EXHAUSTED.
  absl::StatusOr<v1::RegisterResponse> Register(
      const v1::RegisterRequest& request) override;
  // NOT_FOUND: evicted.
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(
      const v1::HeartbeatRequest& request) override;
  // NOT_FOUND: unknown or evicted; ABORTED: drop the report and ask again.
  // A retried call resends the same report: the coordinator must treat a
  // repeated report as one.
  absl::StatusOr<v1::NextTaskResponse> NextTask(
      const v1::NextTaskRequest& request) override;
  absl::Status Leave(const v1::LeaveRequest& request) override;
  // The job, without joining it (a host checks its model against it before
  // it registers). Retried like Register.
  absl::StatusOr<v1::JobSpec> GetJob();
  // Defines the model of a job whose model comes from its first worker
  // (JobSpec.model_from_worker): `tensors` in a first call, then `values`
  // (the whole flat buffer) in calls of at most kMaxModelValuesPerCall
  // values, all under one new random definition id, each retried like
  // Register. True when this definition is the job's model; false when it
  // is not (ALREADY_EXISTS: another worker's is; ABORTED: another's is
  // being given, or this one's claim was lost to a coordinator restart):
  // ask GetJob, and define again while the job still has no tensors. The
  // coordinator's other errors (INVALID_ARGUMENT naming what it refused).
  // `optimizer` (may be null): the job's optimizer, sent with the tensors.
  absl::StatusOr<bool> DefineModel(
      const std::string& job_id, const std::vector<v1::TensorSpec>& tensors,
      absl::Span<const float> values,
      const v1::OptimizerSpec* optimizer = nullptr);
  // Elements [begin, end) of such a job's starting values, in calls of at
  // most kMaxModelValuesPerCall values retried like Register.
  // FAILED_PRECONDITION before the model is defined.
  absl::StatusOr<std::vector<float>> ModelValues(const std::string& job_id,
                                                 int64_t begin, int64_t end);

  // Cumulative payload bytes exchanged with the coordinator.
  TransferBytes bytes() const override { return counter_.Get(); }

 private:
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(
      grpc::Status (v1::Coordinator::StubInterface::*method)(
          grpc::ClientContext*, const Request&, Response*),
      const Request& request, absl::Duration timeout, bool retry);

  const std::unique_ptr<v1::Coordinator::StubInterface> stub_;
  const CoordinatorClientOptions options_;
  ByteCounter counter_;
};

// The starting values of job `job_id` (JobSpec.model_from_worker) from the
// coordinator at `address`, as a PS shard loads them
// (ShardHostOptions::model_values): each call connects and reads elements
// [begin, end), retrying UNAVAILABLE for up to a minute.
std::function<absl::StatusOr<std::vector<float>>(int64_t begin, int64_t end)>
CoordinatorModelValues(const std::string& address, const std::string& job_id);

// Sends Heartbeat{worker_id, generation()} every `interval` on its own
// thread, from construction until Stop() or eviction. NOT_FOUND marks the
// worker evicted and ends the thread; other failures are logged (once per
// change) and the beat goes on. A newer generation in an answer is kept.
//
// Thread safety: all methods are thread-safe.
class Heartbeater {
 public:
  // `client` must outlive the Heartbeater.
  Heartbeater(CoordinatorApi* client, std::string worker_id, int64_t generation,
              absl::Duration interval);
  ~Heartbeater();  // Stop()

  // Ends the thread and waits for it. Idempotent.
  void Stop();
  bool evicted() const;
  // The newest membership generation seen.
  int64_t generation() const;
  // Records a generation seen elsewhere (e.g. in a NextTask answer).
  void ObserveGeneration(int64_t generation);
  // The newest fence seen (HeartbeatResponse.fence).
  int64_t fence() const;
  // Called on the heartbeat thread with every newer fence (the coordinator
  // aborted open steps). Set it before the first beat that matters.
  void SetFenceListener(std::function<void(int64_t)> listener);
  // Called with every larger committed step count: on the heartbeat thread
  // (HeartbeatResponse.committed_steps), or on ObserveCommitted's caller's.
  // Two threads may call it at once, so counts can arrive out of order: a
  // listener keeps the largest (RingStateCopies::ObserveCommitted does).
  void SetCommittedListener(std::function<void(int64_t)> listener);
  // Records a committed step count seen elsewhere (a report's answer).
  void ObserveCommitted(int64_t steps);

 private:
  void Loop();

  CoordinatorApi* const client_;
  const std::string worker_id_;
  const absl::Duration interval_;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool evicted_ ABSL_GUARDED_BY(mu_) = false;
  int64_t generation_ ABSL_GUARDED_BY(mu_);
  int64_t fence_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void(int64_t)> fence_listener_ ABSL_GUARDED_BY(mu_);
  int64_t committed_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void(int64_t)> committed_listener_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_COORDINATOR_CLIENT_H_

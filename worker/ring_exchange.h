// The ring-mode half of a worker's step: keeps one ring session (links,
// collective, bucket reducer) per ring generation, broadcasts rank 0's
// state (weights, optimizer state and step count) into a new ring,
// all-reduces gradient buckets while the backward pass runs, then divides
// by the step's sample count and applies the optimizer locally (the same
// common/ code a PS shard runs).
//
// Rollback: before applying a step the state is copied (the last
// kStateCopies steps are kept). A new ring generation starts from the state
// after exactly `lease.step()` steps: a member that applied steps the
// coordinator then aborted goes back to its copy first, so rank 0 always
// broadcasts the committed state.
//
// Thread safety: one thread (the worker's training loop) uses it, except
// CancelIfOlder(), which any thread may call.
#ifndef FERRY_WORKER_RING_EXCHANGE_H_
#define FERRY_WORKER_RING_EXCHANGE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "compute/compute_backend.h"
#include "compute/optimizer.h"
#include "ferry/v1/coordinator.pb.h"
#include "ring/bucket_plan.h"
#include "ring/bucket_reducer.h"
#include "ring/grpc_ring_transport.h"
#include "ring/ring_collective.h"
#include "ring/ring_peer_service.h"

namespace ferry {

struct RingExchangeOptions {
  std::string job_id;
  std::string worker_id;
  ComputeBackend* backend = nullptr;  // not owned
  RingPeerServer* peer = nullptr;     // this worker's peer service; not owned
  std::vector<int64_t> tensor_sizes;  // model order
  int64_t bucket_elements = 0;
  OptimizerConfig optimizer;
  // Buffers of num_parameters floats, not owned: params and grads in the
  // backend's memory; host_grads the host buffer the ring reduces (equal to
  // grads for a host-memory backend).
  float* params = nullptr;
  float* grads = nullptr;
  float* host_grads = nullptr;
  // Deadline of one collective (a bucket or the broadcast).
  absl::Duration collective_timeout = absl::Seconds(30);
  // Gradient compression of the bucket all-reduces (the weight broadcast
  // stays fp32); lossy encodings with feedback keep a residual here that
  // outlives ring generations.
  GradientCompression compression;
};

class RingExchange {
 public:
  // INVALID_ARGUMENT for a bad bucket size or optimizer config.
  static absl::StatusOr<std::unique_ptr<RingExchange>> Create(
      RingExchangeOptions options);

  // Before computing `lease`: joins the lease's ring (new links and a
  // broadcast of rank 0's weights into params when the ring generation
  // changed) and starts the step's all-reduce. INVALID_ARGUMENT for a lease
  // without a ring or with step_samples <= 0; transport errors otherwise.
  absl::Status BeginStep(const v1::NextTaskResponse& lease);
  // host_grads[offset, offset + length) is final.
  absl::Status Ready(int64_t offset, int64_t length);
  // Waits for every bucket, then params -= optimizer(sum / step_samples).
  // On error the ring session is dropped (the next step builds a new one).
  absl::Status FinishStep();
  // Drops the ring session after a failed step.
  void Abandon();
  // Thread-safe: when the step in flight was leased under a fence older
  // than `fence` (the coordinator aborted it), its collective ends at once
  // with CANCELLED.
  void CancelIfOlder(int64_t fence);

  int64_t steps_applied() const { return optimizer_.steps_applied(); }
  size_t num_buckets() const { return plan_.size(); }
  // Copies params to the publisher when a reader asked for them.
  absl::Status PublishIfWanted();
  // FNV-1a over the bytes of params (host copy for device backends).
  absl::StatusOr<uint64_t> WeightsDigest();
  TransferBytes bytes() const { return options_.peer->counter->Get(); }

 private:
  RingExchange(RingExchangeOptions options, std::vector<Bucket> plan,
               Optimizer optimizer, int64_t n)
      : options_(std::move(options)),
        plan_(std::move(plan)),
        optimizer_(std::move(optimizer)),
        n_(n) {}
  absl::Status JoinRing(const v1::NextTaskResponse& lease);
  absl::StatusOr<std::vector<float>> HostParams();
  // Puts the state back to after `steps` steps from a copy. FAILED_PRECONDITION
  // when no copy of that step is kept.
  absl::Status RollBackTo(int64_t steps);
  // Copies the state before the step about to be applied.
  absl::Status CopyState();
  // Rank 0's params, optimizer state and step count to every member.
  absl::Status BroadcastState(RingCollective& collective, int root);

  struct Session {
    int64_t ring_generation = 0;
    int64_t fence = 0;
    std::unique_ptr<GrpcRingTransport> transport;
    std::unique_ptr<RingCollective> collective;
    std::unique_ptr<BucketAllReducer> reducer;
    int64_t next_op = 0;
  };

  const RingExchangeOptions options_;
  const std::vector<Bucket> plan_;
  Optimizer optimizer_;
  const int64_t n_;
  struct StateCopy {
    int64_t steps = -1;  // -1: empty
    DeviceBuffer params;
    std::vector<DeviceBuffer> state;
  };
  static constexpr int kStateCopies = 3;

  std::unique_ptr<Session>
      session_;  // written by the training thread under cancel_mu_
  absl::Mutex cancel_mu_;
  int64_t step_fence_ ABSL_GUARDED_BY(cancel_mu_) = 0;
  int64_t step_samples_ = 0;
  StateCopy copies_[kStateCopies];
  std::unique_ptr<ErrorFeedback> feedback_;  // null: no error feedback
};

}  // namespace ferry

#endif  // FERRY_WORKER_RING_EXCHANGE_H_

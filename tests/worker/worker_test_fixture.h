// In-memory stand-ins for everything a distributed worker touches, so that
// tests run several workers (and their RingExchanges) in one process with
// no gRPC, no child process and no sleep:
//  - RingHubs: one InMemoryRingHub per ring generation, shared by the
//    ranks of that ring, with a hook that fails a chosen Send;
//  - InMemoryPeerEndpoint: a worker's PeerEndpoint over RingHubs;
//  - InProcessCoordinator: CoordinatorApi over the real coordinator core
//    (coordinator/coordinator.h), with a hook that sees every lease;
//  - NoShards: the ShardControl of a ring job (evaluation only).
#ifndef FERRY_TESTS_WORKER_WORKER_TEST_FIXTURE_H_
#define FERRY_TESTS_WORKER_WORKER_TEST_FIXTURE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "coordinator/coordinator.h"
#include "coordinator/coordinator_api.h"
#include "ring/in_memory_ring.h"
#include "worker/worker_deps.h"

namespace ferry::testing {

// Rings by generation. Thread-safe.
class RingHubs {
 public:
  // The transport of `rank` in the ring of `ring_generation`, whose hub
  // (of `size` ranks) is created by the first rank that asks.
  // INVALID_ARGUMENT when a rank asks with another size or rank out of
  // range.
  absl::StatusOr<std::unique_ptr<RingTransport>> Connect(
      int64_t ring_generation, int size, int rank);
  // The next Send of `rank` in ring `ring_generation` fails with
  // UNAVAILABLE (a broken link), once.
  void FailNextSend(int64_t ring_generation, int rank);
  // The same for the send after the next `skip` sends (a failure in a
  // later phase of the step).
  void FailSendAfter(int64_t ring_generation, int rank, int skip);
  // Ring generations connected so far, in increasing order.
  std::vector<int64_t> generations() const;

 private:
  friend class HubTransport;
  bool TakeFailure(int64_t ring_generation, int rank);

  mutable absl::Mutex mu_;
  std::map<int64_t, std::shared_ptr<InMemoryRingHub>> hubs_
      ABSL_GUARDED_BY(mu_);
  std::map<std::pair<int64_t, int>, int> failures_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<int64_t, int>, int> skips_ ABSL_GUARDED_BY(mu_);
};

// A worker's PeerEndpoint whose links come from `hubs` (not owned).
class InMemoryPeerEndpoint final : public PeerEndpoint {
 public:
  InMemoryPeerEndpoint(RingHubs* hubs, std::string address)
      : hubs_(hubs), address_(std::move(address)) {}
  std::string address() const override { return address_; }
  void SetJob(const std::string&) override {}
  absl::StatusOr<std::unique_ptr<RingTransport>> Connect(
      const std::string& job_id, const v1::NextTaskResponse& lease) override;
  WeightsPublisher* publisher() override { return &publisher_; }
  const ByteCounter* counter() const override { return nullptr; }

 private:
  RingHubs* const hubs_;
  const std::string address_;
  WeightsPublisher publisher_;
};

// CoordinatorApi over a Coordinator (not owned). `on_lease`, when set, sees
// every TRAIN lease before the worker does (on the worker's thread).
class InProcessCoordinator final : public CoordinatorApi {
 public:
  using LeaseHook = std::function<void(const v1::NextTaskResponse&)>;
  InProcessCoordinator(Coordinator* coordinator, LeaseHook on_lease = {})
      : coordinator_(coordinator), on_lease_(std::move(on_lease)) {}

  absl::StatusOr<v1::RegisterResponse> Register(
      const v1::RegisterRequest& request) override;
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(
      const v1::HeartbeatRequest& request) override;
  absl::StatusOr<v1::NextTaskResponse> NextTask(
      const v1::NextTaskRequest& request) override;
  absl::Status Leave(const v1::LeaveRequest& request) override;
  TransferBytes bytes() const override { return {}; }
  // Notified once a Register succeeded.
  absl::Notification& registered() { return registered_; }

 private:
  Coordinator* const coordinator_;
  const LeaseHook on_lease_;
  absl::Notification registered_;
};

// Ring jobs have no shards: finalizing, checkpoints and restores succeed
// without effect; evaluation answers fixed figures.
class NoShards final : public ShardControl {
 public:
  absl::Status FinalizeStep(int64_t, int64_t,
                            const std::vector<v1::Contributor>&) override {
    return absl::OkStatus();
  }
  absl::StatusOr<TestScores> Evaluate(int64_t) override {
    return TestScores{.accuracy = 0.5, .loss = 1.0};
  }
  absl::Status Checkpoint(int64_t, const std::vector<int64_t>&) override {
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<int64_t>> Versions() override {
    return std::vector<int64_t>{};
  }
  absl::Status RestoreTo(int64_t, int64_t) override { return absl::OkStatus(); }
  absl::Status Fence(int64_t) override { return absl::OkStatus(); }
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_WORKER_WORKER_TEST_FIXTURE_H_

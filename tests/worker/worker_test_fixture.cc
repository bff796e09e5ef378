#include "tests/worker/worker_test_fixture.h"

#include <future>

#include "absl/strings/str_format.h"

namespace ferry::testing {

// Rank `rank`'s transport of a hub, keeping the hub alive; Send fails once
// when RingHubs says so.
class HubTransport final : public RingTransport {
 public:
  HubTransport(RingHubs* hubs, int64_t generation,
               std::shared_ptr<InMemoryRingHub> hub, int rank)
      : hubs_(hubs),
        generation_(generation),
        hub_(std::move(hub)),
        inner_(hub_->transport(rank)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  absl::Status Send(const RingTag& tag, const float* data,
                    int64_t count) override {
    if (hubs_->TakeFailure(generation_, rank())) {
      return absl::UnavailableError(
          absl::StrFormat("injected: link of rank %d broken", rank()));
    }
    return inner_->Send(tag, data, count);
  }
  absl::Status Recv(const RingTag& tag, float* dst, int64_t count, RecvOp op,
                    absl::Time deadline) override {
    return inner_->Recv(tag, dst, count, op, deadline);
  }
  absl::Status SendBytes(const RingTag& tag, std::string payload) override {
    if (hubs_->TakeFailure(generation_, rank())) {
      return absl::UnavailableError("injected: link broken");
    }
    return inner_->SendBytes(tag, std::move(payload));
  }
  absl::StatusOr<std::string> RecvBytes(const RingTag& tag,
                                        absl::Time deadline) override {
    return inner_->RecvBytes(tag, deadline);
  }
  void Abort() override { inner_->Abort(); }

 private:
  RingHubs* const hubs_;
  const int64_t generation_;
  const std::shared_ptr<InMemoryRingHub> hub_;
  RingTransport* const inner_;
};

absl::StatusOr<std::unique_ptr<RingTransport>> RingHubs::Connect(
    int64_t ring_generation, int size, int rank) {
  std::shared_ptr<InMemoryRingHub> hub;
  {
    absl::MutexLock lock(&mu_);
    std::shared_ptr<InMemoryRingHub>& slot = hubs_[ring_generation];
    if (slot == nullptr) slot = std::make_shared<InMemoryRingHub>(size);
    hub = slot;
  }
  if (hub->size() != size || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ring %d: rank %d of %d, hub of %d", ring_generation,
                        rank, size, hub->size()));
  }
  return std::unique_ptr<RingTransport>(
      std::make_unique<HubTransport>(this, ring_generation, hub, rank));
}

void RingHubs::FailNextSend(int64_t ring_generation, int rank) {
  absl::MutexLock lock(&mu_);
  ++failures_[{ring_generation, rank}];
}

void RingHubs::FailSendAfter(int64_t ring_generation, int rank, int skip) {
  absl::MutexLock lock(&mu_);
  ++failures_[{ring_generation, rank}];
  skips_[{ring_generation, rank}] = skip;
}

bool RingHubs::TakeFailure(int64_t ring_generation, int rank) {
  absl::MutexLock lock(&mu_);
  auto it = failures_.find({ring_generation, rank});
  if (it == failures_.end() || it->second == 0) return false;
  if (int& skip = skips_[{ring_generation, rank}]; skip > 0) {
    --skip;
    return false;
  }
  --it->second;
  return true;
}

std::vector<int64_t> RingHubs::generations() const {
  absl::MutexLock lock(&mu_);
  std::vector<int64_t> out;
  for (const auto& [generation, hub] : hubs_) out.push_back(generation);
  return out;
}

absl::StatusOr<std::unique_ptr<RingTransport>> InMemoryPeerEndpoint::Connect(
    const std::string&, const v1::NextTaskResponse& lease) {
  return hubs_->Connect(lease.ring_generation(), lease.ring_size(),
                        lease.rank());
}

absl::StatusOr<v1::RegisterResponse> InProcessCoordinator::Register(
    const v1::RegisterRequest& request) {
  absl::StatusOr<v1::RegisterResponse> response =
      coordinator_->Register(request);
  if (response.ok() && !registered_.HasBeenNotified()) registered_.Notify();
  return response;
}

absl::StatusOr<v1::HeartbeatResponse> InProcessCoordinator::Heartbeat(
    const v1::HeartbeatRequest& request) {
  return coordinator_->Heartbeat(request.worker_id());
}

absl::StatusOr<v1::NextTaskResponse> InProcessCoordinator::NextTask(
    const v1::NextTaskRequest& request) {
  std::promise<absl::StatusOr<v1::NextTaskResponse>> answer;
  std::future<absl::StatusOr<v1::NextTaskResponse>> result =
      answer.get_future();
  coordinator_->NextTask(request,
                         [&answer](absl::StatusOr<v1::NextTaskResponse> r) {
                           answer.set_value(std::move(r));
                         });
  absl::StatusOr<v1::NextTaskResponse> response = result.get();
  if (response.ok() && on_lease_ &&
      response->action() == v1::NextTaskResponse::TRAIN) {
    on_lease_(*response);
  }
  return response;
}

absl::Status InProcessCoordinator::Leave(const v1::LeaveRequest& request) {
  return coordinator_->Leave(request.worker_id());
}

}  // namespace ferry::testing

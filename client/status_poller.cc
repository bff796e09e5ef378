#include "client/status_poller.h"

#include "absl/time/clock.h"
#include "proto/rpc_util.h"

namespace ferry {

// Shared by the poller and the completion callback, so that it outlives
// whichever of the two finishes last.
struct StatusPoller::Call {
  grpc::ClientContext context;
  v1::StatusRequest request;
  v1::StatusResponse response;
  absl::Mutex mu;
  std::optional<absl::StatusOr<v1::StatusResponse>> result ABSL_GUARDED_BY(mu);
  bool done ABSL_GUARDED_BY(mu) = false;
};

StatusPoller::StatusPoller(std::string address, absl::Duration deadline)
    : address_(std::move(address)), deadline_(deadline) {
  Reconnect();
}

StatusPoller::~StatusPoller() {
  if (in_flight_) in_flight_->context.TryCancel();
}

void StatusPoller::Reconnect() {
  if (in_flight_) in_flight_->context.TryCancel();
  in_flight_.reset();
  stub_ = v1::Coordinator::NewStub(MakeChannel(address_));
  last_start_ = absl::InfinitePast();
}

void StatusPoller::MaybeStart(absl::Duration interval) {
  if (in_flight_ || absl::Now() - last_start_ < interval) return;
  auto call = std::make_shared<Call>();
  SetDeadline(call->context, deadline_);
  last_start_ = absl::Now();
  in_flight_ = call;
  stub_->async()->Status(&call->context, &call->request, &call->response,
                         [call](grpc::Status status) {
                           absl::MutexLock lock(&call->mu);
                           if (status.ok()) {
                             call->result = std::move(call->response);
                           } else {
                             call->result = FromGrpcStatus(status);
                           }
                           call->done = true;
                         });
}

std::optional<absl::StatusOr<v1::StatusResponse>> StatusPoller::Take() {
  if (!in_flight_) return std::nullopt;
  std::shared_ptr<Call> call = in_flight_;
  absl::MutexLock lock(&call->mu);
  if (!call->done) return std::nullopt;
  in_flight_.reset();
  return std::move(call->result);
}

}  // namespace ferry

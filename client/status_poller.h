// Polls a coordinator's Status without blocking the caller: at most one call
// in flight (callback API), its result picked up later. `ferry local` uses it
// so that a hung (SIGSTOPped) or restarting coordinator does not delay chaos
// events or restarts.
//
// Thread safety: Start/Take/Reconnect from one thread; the completion
// callback runs on a gRPC thread and only touches the guarded result.
#ifndef FERRY_CLIENT_STATUS_POLLER_H_
#define FERRY_CLIENT_STATUS_POLLER_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ferry/v1/coordinator.grpc.pb.h"

namespace ferry {

class StatusPoller {
 public:
  // Each call gets `deadline`.
  StatusPoller(std::string address, absl::Duration deadline);
  ~StatusPoller();  // cancels a call in flight

  // Starts a call unless one is in flight or the last one started less than
  // `interval` ago.
  void MaybeStart(absl::Duration interval);
  // The result of the last completed call, once (nullopt: none new).
  std::optional<absl::StatusOr<v1::StatusResponse>> Take();
  // A new channel (after the coordinator was restarted: the old channel may
  // be in a long reconnect backoff). A call in flight is abandoned.
  void Reconnect();

 private:
  struct Call;

  std::string address_;
  absl::Duration deadline_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  std::shared_ptr<Call> in_flight_;
  absl::Time last_start_ = absl::InfinitePast();
};

}  // namespace ferry

#endif  // FERRY_CLIENT_STATUS_POLLER_H_

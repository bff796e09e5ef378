// The worker's view of the coordinator protocol (ferry.v1.Coordinator) as an
// interface with no gRPC types, so that the worker's training loop can run
// against the gRPC client (CoordinatorClient) or, in tests, against an
// in-process adapter around the coordinator core.
#ifndef FERRY_COORDINATOR_COORDINATOR_API_H_
#define FERRY_COORDINATOR_COORDINATOR_API_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/byte_counter.h"
#include "ferry/v1/coordinator.pb.h"

namespace ferry {

// Register's FAILED_PRECONDITION message once the job has finished
// training: a worker that arrives then (a late join, a rejoin after an
// eviction) has nothing to do and ends as finished.
inline constexpr char kJobFinishedTraining[] = "the job has finished training";
inline bool IsJobFinishedTraining(const absl::Status& status) {
  return absl::IsFailedPrecondition(status) &&
         status.message() == kJobFinishedTraining;
}

// Thread safety: implementations allow every method to be called from
// several threads at once (the training loop, the report sender and the
// heartbeat thread share one). Errors are the coordinator's (see
// coordinator.proto and coordinator/coordinator.h), or UNAVAILABLE /
// DEADLINE_EXCEEDED from the transport.
class CoordinatorApi {
 public:
  virtual ~CoordinatorApi() = default;

  // FAILED_PRECONDITION (other job, job finished), RESOURCE_EXHAUSTED.
  virtual absl::StatusOr<v1::RegisterResponse> Register(
      const v1::RegisterRequest& request) = 0;
  // NOT_FOUND: evicted.
  virtual absl::StatusOr<v1::HeartbeatResponse> Heartbeat(
      const v1::HeartbeatRequest& request) = 0;
  // Blocks until the coordinator answers (it long-polls). NOT_FOUND: unknown
  // or evicted; ABORTED: drop the report and ask again. A repeated report
  // must count as one.
  virtual absl::StatusOr<v1::NextTaskResponse> NextTask(
      const v1::NextTaskRequest& request) = 0;
  virtual absl::Status Leave(const v1::LeaveRequest& request) = 0;

  // Cumulative payload bytes exchanged with the coordinator (zero when not
  // counted).
  virtual TransferBytes bytes() const = 0;
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_COORDINATOR_API_H_

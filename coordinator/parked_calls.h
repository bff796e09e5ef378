// ParkedCalls: the NextTask calls that got no action yet (a long poll, or
// a report-only call waiting for its step to be applied),
// in the order they arrived, each with its deadline. Serve() answers those
// that can be answered now, and with `on_expiry` (WAIT) those whose long
// poll is over; the answers are collected for the caller to send after
// its lock, never called here.
//
// Ownership: owns the parked requests and their callbacks.
// Thread safety: not thread-safe. The Coordinator holds it as a field
// guarded by its mutex (ABSL_GUARDED_BY(mu_)).
#ifndef FERRY_COORDINATOR_PARKED_CALLS_H_
#define FERRY_COORDINATOR_PARKED_CALLS_H_

#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ferry/v1/coordinator.pb.h"

namespace ferry {

class ParkedCalls {
 public:
  using Callback = std::function<void(absl::StatusOr<v1::NextTaskResponse>)>;
  // A call's callback with its answer, to be sent outside the lock.
  using Reply = std::pair<Callback, absl::StatusOr<v1::NextTaskResponse>>;
  // The answer to a parked request now, or nullopt to keep it parked.
  using Assign =
      std::function<std::optional<absl::StatusOr<v1::NextTaskResponse>>(
          const v1::NextTaskRequest&)>;

  // Parks `request` (without its report, which was recorded already; a
  // report-only call keeps the reported step and fence) until `deadline`.
  void Park(v1::NextTaskRequest request, Callback done, absl::Time deadline);
  // The calls of `worker_id` parked now.
  int64_t Count(const std::string& worker_id) const;
  int64_t size() const { return static_cast<int64_t>(calls_.size()); }

  // In arrival order: a call `assign` answers leaves with that answer;
  // otherwise, when `expire_due` and `now` >= its deadline, it leaves with
  // `on_expiry`. Appends the answers to `replies`.
  void Serve(absl::Time now, bool expire_due, const Assign& assign,
             const v1::NextTaskResponse& on_expiry,
             std::vector<Reply>& replies);
  // Answers every parked call with `status` and empties the list.
  void FailAll(const absl::Status& status, std::vector<Reply>& replies);

  // Calls every callback with its answer, in order, and empties `replies`.
  static void Send(std::vector<Reply>& replies);

 private:
  struct Call {
    v1::NextTaskRequest request;
    Callback done;
    absl::Time deadline;
  };
  std::list<Call> calls_;
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_PARKED_CALLS_H_

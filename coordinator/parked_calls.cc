#include "coordinator/parked_calls.h"

#include <algorithm>

namespace ferry {

void ParkedCalls::Park(v1::NextTaskRequest request, Callback done,
                       absl::Time deadline) {
  if (request.report_only()) {
    // What the answer depends on: the reported step and its fence.
    v1::StepReport reported;
    reported.set_step(request.done().step());
    reported.set_fence(request.done().fence());
    *request.mutable_done() = std::move(reported);
  } else {
    request.clear_done();
  }
  calls_.push_back({std::move(request), std::move(done), deadline});
}

int64_t ParkedCalls::Count(const std::string& worker_id) const {
  return std::count_if(calls_.begin(), calls_.end(), [&](const Call& c) {
    return c.request.worker_id() == worker_id;
  });
}

void ParkedCalls::Serve(absl::Time now, bool expire_due, const Assign& assign,
                        const v1::NextTaskResponse& on_expiry,
                        std::vector<Reply>& replies) {
  for (auto c = calls_.begin(); c != calls_.end();) {
    auto assigned = assign(c->request);
    if (assigned.has_value()) {
      replies.emplace_back(std::move(c->done), std::move(*assigned));
      c = calls_.erase(c);
    } else if (expire_due && now >= c->deadline) {
      replies.emplace_back(std::move(c->done), on_expiry);
      c = calls_.erase(c);
    } else {
      ++c;
    }
  }
}

void ParkedCalls::FailAll(const absl::Status& status,
                          std::vector<Reply>& replies) {
  for (Call& c : calls_) replies.emplace_back(std::move(c.done), status);
  calls_.clear();
}

void ParkedCalls::Send(std::vector<Reply>& replies) {
  for (auto& [done, response] : replies) done(std::move(response));
  replies.clear();
}

}  // namespace ferry

#include "ring/ring_mailbox.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ferry {

bool RingMailbox::EnterLocked(int64_t generation) {
  mu_.AssertHeld();
  if (generation < generation_) return false;
  if (generation > generation_) {
    generation_ = generation;
    messages_.clear();
    buffered_ = 0;
    failure_ = absl::OkStatus();
  }
  return true;
}

bool RingMailbox::Enter(int64_t generation) {
  absl::MutexLock lock(&mu_);
  return EnterLocked(generation);
}

absl::Status RingMailbox::Deliver(int64_t generation, const RingTag& tag,
                                  RingPayload payload) {
  absl::MutexLock lock(&mu_);
  if (!EnterLocked(generation)) {
    return absl::AbortedError(absl::StrCat("ring message of generation ",
                                           generation, " is older than ",
                                           generation_));
  }
  if (messages_.contains(tag)) {
    return absl::AlreadyExistsError(
        absl::StrCat("ring message ", tag.ToString(), " arrived twice"));
  }
  const int64_t count = static_cast<int64_t>(messages_.size());
  if (count >= max_messages_) {
    return LimitExceeded("the number of unclaimed ring messages", count + 1,
                         max_messages_);
  }
  const int64_t size = static_cast<int64_t>(payload.size());
  if (buffered_ + size > max_buffered_bytes_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("ring mailbox full: ", buffered_,
                     " bytes unclaimed, limit ", max_buffered_bytes_));
  }
  buffered_ += size;
  messages_.emplace(tag, std::move(payload));
  return absl::OkStatus();
}

absl::StatusOr<RingPayload> RingMailbox::Take(int64_t generation,
                                              const RingTag& tag,
                                              absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  const auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ || generation_ > generation || !failure_.ok() ||
           messages_.contains(tag);
  };
  EnterLocked(generation);
  mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
  if (closed_) return absl::CancelledError("ring mailbox closed");
  if (generation_ > generation) {
    return absl::CancelledError(absl::StrCat("ring generation ", generation,
                                             " was replaced by ", generation_));
  }
  auto it = messages_.find(tag);
  if (it == messages_.end()) {
    if (!failure_.ok()) return failure_;
    return absl::DeadlineExceededError(
        absl::StrCat("ring message ", tag.ToString(), " did not arrive"));
  }
  RingPayload payload = std::move(it->second);
  buffered_ -= static_cast<int64_t>(payload.size());
  messages_.erase(it);
  return payload;
}

void RingMailbox::Fail(int64_t generation, absl::Status status) {
  absl::MutexLock lock(&mu_);
  if (generation == generation_ && failure_.ok()) failure_ = std::move(status);
}

void RingMailbox::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

int64_t RingMailbox::buffered_bytes() const {
  absl::MutexLock lock(&mu_);
  return buffered_;
}

}  // namespace ferry

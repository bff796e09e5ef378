#include "ring/ring_mailbox.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ferry {
namespace {

void Run(std::vector<std::function<void()>>& resumes) {
  for (std::function<void()>& resume : resumes) resume();
}

}  // namespace

bool RingMailbox::EnterLocked(int64_t generation) {
  mu_.AssertHeld();
  if (generation < generation_) return false;
  if (generation > generation_) {
    DropLinksLocked(absl::CancelledError(absl::StrCat(
        "ring generation ", generation_, " was replaced by ", generation)));
    generation_ = generation;
    messages_.clear();
    buffered_ = 0;
    failure_ = absl::OkStatus();
  }
  return true;
}

bool RingMailbox::ReadingMayGoOnLocked() const {
  return buffered_ < read_ahead_bytes_ || missing_waiters_ > 0 || closed_ ||
         !failure_.ok();
}

RingMailbox::Resumes RingMailbox::TakeResumesLocked() {
  Resumes out;
  if (resumes_.empty() || !ReadingMayGoOnLocked()) return out;
  for (auto& [token, resume] : resumes_) out.push_back(std::move(resume));
  resumes_.clear();
  return out;
}

bool RingMailbox::Enter(int64_t generation) {
  Resumes resumes;
  bool entered;
  {
    absl::MutexLock lock(&mu_);
    entered = EnterLocked(generation);
    resumes = TakeResumesLocked();
  }
  Run(resumes);
  return entered;
}

absl::Status RingMailbox::Deliver(int64_t generation, const RingTag& tag,
                                  RingPayload payload) {
  Resumes resumes;  // a stream of an older generation, paused
  absl::Status status = [&]() -> absl::Status {
    absl::MutexLock lock(&mu_);
    if (!EnterLocked(generation)) {
      return absl::AbortedError(absl::StrCat("ring message of generation ",
                                             generation, " is older than ",
                                             generation_));
    }
    resumes = TakeResumesLocked();
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
    peak_buffered_ = std::max(peak_buffered_, buffered_);
    messages_.emplace(tag, std::move(payload));
    // A taker reading a link may be waiting for this one.
    for (auto& [key, entry] : links_) {
      if (entry.held) entry.link->Nudge();
    }
    return absl::OkStatus();
  }();
  Run(resumes);
  return status;
}

absl::StatusOr<RingPayload> RingMailbox::TakeFiledLocked(int64_t generation,
                                                         const RingTag& tag) {
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

absl::StatusOr<RingPayload> RingMailbox::Take(int64_t generation,
                                              const RingTag& tag,
                                              absl::Time deadline) {
  absl::StatusOr<Arrival> arrival =
      TakeImpl(generation, tag, deadline, /*sender=*/nullptr);
  if (!arrival.ok()) return arrival.status();
  return *std::move(arrival->payload);
}

absl::StatusOr<RingMailbox::Arrival> RingMailbox::TakeOrLink(
    int64_t generation, const RingTag& tag, const std::string& key,
    absl::Time deadline) {
  return TakeImpl(generation, tag, deadline, &key);
}

absl::StatusOr<RingMailbox::Arrival> RingMailbox::TakeImpl(
    int64_t generation, const RingTag& tag, absl::Time deadline,
    const std::string* key) {
  // The link under `key`, when it is there and no other taker holds it.
  const auto free_link = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    HeldLink* found = nullptr;
    if (key != nullptr && generation_ == generation && !closed_) {
      auto it = links_.find(*key);
      if (it != links_.end() && !it->second.held) found = &it->second;
    }
    return found;
  };
  const auto link_free = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return free_link() != nullptr;
  };
  const auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ || generation_ > generation || !failure_.ok() ||
           messages_.contains(tag) || link_free();
  };
  Resumes resumes;
  absl::StatusOr<Arrival> taken;
  {
    absl::MutexLock lock(&mu_);
    EnterLocked(generation);
    if (!ready()) {
      // Waiting for a message not filed: paused streams read on, since it
      // may be behind what they have not read.
      ++missing_waiters_;
      resumes = TakeResumesLocked();
      if (!resumes.empty()) {
        mu_.Unlock();
        Run(resumes);
        resumes.clear();
        mu_.Lock();
      }
      mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
      --missing_waiters_;
    }
    if (HeldLink* link = free_link(); !messages_.contains(tag) && link) {
      link->held = true;
      taken = Arrival{std::nullopt, link->link};
    } else {
      absl::StatusOr<RingPayload> filed = TakeFiledLocked(generation, tag);
      if (filed.ok()) {
        taken = Arrival{*std::move(filed), nullptr};
      } else {
        taken = filed.status();
      }
    }
    resumes = TakeResumesLocked();
  }
  Run(resumes);
  return taken;
}

absl::Status RingMailbox::AttachLink(int64_t generation, const std::string& key,
                                     std::shared_ptr<ShmLinkReader> link) {
  Resumes resumes;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    if (!EnterLocked(generation)) {
      status = absl::AbortedError(absl::StrCat("a ring link of generation ",
                                               generation, " is older than ",
                                               generation_));
    } else {
      HeldLink& entry = links_[key];
      if (entry.link != nullptr && entry.link->PeerHolds()) {
        status = absl::AlreadyExistsError(
            absl::StrCat("a shared-memory link ", key, " of generation ",
                         generation, " is attached already"));
      } else {
        if (entry.link != nullptr) {
          entry.link->Interrupt(
              absl::CancelledError("the ring link was replaced"));
        }
        entry = HeldLink{std::move(link), false};
      }
    }
    resumes = TakeResumesLocked();
  }
  Run(resumes);
  return status;
}

void RingMailbox::ReleaseLink(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = links_.find(key);
  if (it != links_.end()) it->second.held = false;
}

void RingMailbox::DetachLink(const std::string& key,
                             const ShmLinkReader* link) {
  absl::MutexLock lock(&mu_);
  auto it = links_.find(key);
  if (it != links_.end() && it->second.link.get() == link) links_.erase(it);
}

bool RingMailbox::Filed(int64_t generation, const RingTag& tag) const {
  absl::MutexLock lock(&mu_);
  return generation == generation_ && messages_.contains(tag);
}

void RingMailbox::DropLinksLocked(const absl::Status& why) {
  for (auto& [key, entry] : links_) entry.link->Interrupt(why);
  links_.clear();
}

void RingMailbox::Fail(int64_t generation, absl::Status status) {
  Resumes resumes;
  {
    absl::MutexLock lock(&mu_);
    if (generation == generation_ && failure_.ok()) {
      failure_ = std::move(status);
      for (auto& [key, entry] : links_) entry.link->Interrupt(failure_);
    }
    resumes = TakeResumesLocked();
  }
  Run(resumes);
}

void RingMailbox::Close() {
  Resumes resumes;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    for (auto& [key, entry] : links_) {
      entry.link->Interrupt(absl::CancelledError("ring mailbox closed"));
    }
    resumes = TakeResumesLocked();
  }
  Run(resumes);
}

bool RingMailbox::MayReadOn(std::function<void()> resume, int64_t* token) {
  absl::MutexLock lock(&mu_);
  if (ReadingMayGoOnLocked()) return true;
  *token = next_token_++;
  resumes_.emplace(*token, std::move(resume));
  ++paused_reads_;
  return false;
}

bool RingMailbox::CancelResume(int64_t token) {
  absl::MutexLock lock(&mu_);
  return resumes_.erase(token) > 0;
}

int64_t RingMailbox::buffered_bytes() const {
  absl::MutexLock lock(&mu_);
  return buffered_;
}

int64_t RingMailbox::paused_reads() const {
  absl::MutexLock lock(&mu_);
  return paused_reads_;
}

int64_t RingMailbox::peak_buffered_bytes() const {
  absl::MutexLock lock(&mu_);
  return peak_buffered_;
}

}  // namespace ferry

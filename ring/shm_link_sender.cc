#include "ring/shm_link_sender.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "ring/ring_wire.h"

namespace ferry {

ShmLinkSender::ShmLinkSender(std::unique_ptr<ShmLinkWriter> writer,
                             ByteCounter* counter, std::string peer)
    : writer_(std::move(writer)),
      counter_(counter),
      peer_(std::move(peer)),
      thread_([this] { Run(); }) {}

ShmLinkSender::~ShmLinkSender() { Close(absl::Seconds(1)); }

absl::Status ShmLinkSender::Send(const RingTag& tag, const float* data,
                                 int64_t count) {
  Item item;
  item.tag = tag;
  item.bytes = count * static_cast<int64_t>(sizeof(float));
  item.owned.assign(reinterpret_cast<const char*>(data),
                    static_cast<size_t>(item.bytes));
  return Enqueue(std::move(item));
}

absl::Status ShmLinkSender::SendBorrowed(const RingTag& tag, const float* data,
                                         int64_t count) {
  Item item;
  item.tag = tag;
  item.data = data;
  item.bytes = count * static_cast<int64_t>(sizeof(float));
  item.borrowed = true;
  return Enqueue(std::move(item));
}

absl::Status ShmLinkSender::SendBytes(const RingTag& tag, std::string payload) {
  Item item;
  item.tag = tag;
  item.encoded = true;
  item.bytes = static_cast<int64_t>(payload.size());
  item.owned = std::move(payload);
  return Enqueue(std::move(item));
}

absl::Status ShmLinkSender::Enqueue(Item item) {
  absl::MutexLock lock(&mu_);
  if (!failure_.ok()) return failure_;
  if (stopping_) {
    return absl::UnavailableError(
        absl::StrFormat("the shared-memory link to %s is closed", peer_));
  }
  counter_->AddSent(RingMessageWireBytes(
      item.tag, static_cast<size_t>(item.bytes), item.encoded));
  if (item.borrowed) ++borrowed_queued_;
  queue_.push_back(std::move(item));
  return absl::OkStatus();
}

bool ShmLinkSender::WaitWritten(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithDeadline(
      absl::Condition(
          +[](int64_t* queued) { return *queued == 0; }, &borrowed_queued_),
      deadline);
}

void ShmLinkSender::Fail(absl::Status why) {
  {
    absl::MutexLock lock(&mu_);
    if (failure_.ok()) failure_ = why;
    // The front, if it is being written, is dropped by the writer thread
    // once its write returns (the buffer is read until then).
    const size_t keep = writing_ ? 1 : 0;
    while (queue_.size() > keep) {
      if (queue_.back().borrowed) --borrowed_queued_;
      queue_.pop_back();
    }
  }
  writer_->Interrupt(std::move(why));
}

void ShmLinkSender::Close(absl::Duration timeout) {
  {
    absl::MutexLock lock(&mu_);
    if (!thread_.joinable()) return;
    stopping_ = true;
    mu_.AwaitWithTimeout(
        absl::Condition(
            +[](std::deque<Item>* q) { return q->empty(); }, &queue_),
        timeout);
  }
  Fail(absl::UnavailableError(
      absl::StrFormat("the shared-memory link to %s was closed", peer_)));
  thread_.join();
}

void ShmLinkSender::Run() {
  for (;;) {
    Item* item = nullptr;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ShmLinkSender* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) {
            return !s->queue_.empty() || !s->failure_.ok();
          },
          this));
      if (queue_.empty()) return;  // failed or closed, nothing left
      if (!failure_.ok()) {
        // Failed while idle: nothing is written any more.
        borrowed_queued_ = 0;
        queue_.clear();
        return;
      }
      writing_ = true;
      item = &queue_.front();  // stays put: only this thread pops the front
    }
    const void* data = item->borrowed ? item->data : item->owned.data();
    absl::Status s = writer_->Write(item->tag, item->encoded, data, item->bytes,
                                    absl::InfiniteFuture());
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (item->borrowed) --borrowed_queued_;
    queue_.pop_front();
    if (!s.ok() && failure_.ok()) {
      failure_ = absl::UnavailableError(absl::StrFormat(
          "the shared-memory link to %s failed: %s", peer_, s.ToString()));
    }
  }
}

}  // namespace ferry

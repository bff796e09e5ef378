// The sending end of a shared-memory ring link (ring/shm_link.h) as the
// transport needs it: Send and SendBytes copy and queue, SendBorrowed
// queues the caller's buffer, and one thread writes the queue into the
// link in order, so a Send never waits for the receiver (a full link
// waits on this thread, not the collective's). Counts each message as the
// stream would carry it (RingMessageWireBytes) when it is queued.
//
// Thread safety: all methods are thread-safe.
#ifndef FERRY_RING_SHM_LINK_SENDER_H_
#define FERRY_RING_SHM_LINK_SENDER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/byte_counter.h"
#include "ring/ring_transport.h"
#include "ring/shm_link.h"

namespace ferry {

class ShmLinkSender {
 public:
  // `counter` (not owned) must outlive the sender; `peer` names the
  // receiver in errors.
  ShmLinkSender(std::unique_ptr<ShmLinkWriter> writer, ByteCounter* counter,
                std::string peer);
  // Close(1 s).
  ~ShmLinkSender();

  // As RingTransport's: UNAVAILABLE once the link failed (Fail, or a write
  // that could not finish), CANCELLED after Fail with CANCELLED.
  absl::Status Send(const RingTag& tag, const float* data, int64_t count);
  absl::Status SendBorrowed(const RingTag& tag, const float* data,
                            int64_t count);
  absl::Status SendBytes(const RingTag& tag, std::string payload);
  // True once no queued message is borrowed (each was written into the
  // link, or dropped after a failure); false at `deadline`.
  bool WaitWritten(absl::Time deadline);

  // Fails the link: the write in progress stops, the queue is dropped, and
  // later sends return `why`. Idempotent (the first reason stays).
  void Fail(absl::Status why);
  // Lets the queue drain for up to `timeout`, then fails what is left and
  // stops the thread. Idempotent.
  void Close(absl::Duration timeout);

 private:
  struct Item {
    RingTag tag;
    bool encoded = false;
    const void* data = nullptr;  // borrowed, or into `owned`
    int64_t bytes = 0;
    bool borrowed = false;
    std::string owned;
  };
  absl::Status Enqueue(Item item);
  void Run();

  const std::unique_ptr<ShmLinkWriter> writer_;
  ByteCounter* const counter_;
  const std::string peer_;
  absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  int64_t borrowed_queued_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;  // the front is being written
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace ferry

#endif  // FERRY_RING_SHM_LINK_SENDER_H_

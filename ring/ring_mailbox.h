// Where a worker's ring peer service files the messages its left neighbour
// streams to it, until the local collective takes them (RingTransport::Recv
// of GrpcRingTransport). No gRPC types.
//
// Messages belong to a ring generation. Only the newest generation seen is
// kept: a message of an older generation is refused, and a newer one drops
// everything older (a collective of the old ring waiting in Take() gets
// CANCELLED).
//
// Read-ahead: a stream that filed a message asks MayReadOn before it reads
// the next. Past `read_ahead_bytes` unclaimed, it pauses until the
// collective takes messages (below the bound again) or waits for one not
// filed yet, which may be behind the unread ones: reading stops only while
// no Take() waits for a missing message, so a collective never waits on a
// paused stream. What the neighbour sends meanwhile stays in its buffers
// and the socket's instead of this process's memory.
//
// Shared memory: a generation's messages from a sender may come through a
// link from it on the same host (ring/shm_link.h) instead of its stream.
// The box then holds the link, under the sender's key (ShmLinkKey: the
// sender and its ring; a pipeline stage receives on two), and hands it to one
// taker at a time (TakeOrLink), which reads its message from the link and files
// the ones ahead of it for the takers waiting for those.
//
// Thread safety: all methods are thread-safe.
#ifndef FERRY_RING_RING_MAILBOX_H_
#define FERRY_RING_RING_MAILBOX_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/peer_limits.h"
#include "ring/ring_payload.h"
#include "ring/ring_transport.h"
#include "ring/shm_link.h"

namespace ferry {

class RingMailbox {
 public:
  // `max_buffered_bytes` bounds what unclaimed messages may hold,
  // `max_messages` how many there may be; `read_ahead_bytes` is where
  // streams pause (above).
  explicit RingMailbox(int64_t max_buffered_bytes = int64_t{1} << 30,
                       int64_t max_messages = kDefaultMaxRingMessages,
                       int64_t read_ahead_bytes = kDefaultRingReadAheadBytes)
      : max_buffered_bytes_(max_buffered_bytes),
        max_messages_(max_messages),
        read_ahead_bytes_(read_ahead_bytes) {}

  // Files `payload` (held as it is: pieces of the received message stay
  // where they arrived) under (generation, tag). Errors: ABORTED for a
  // generation older than the newest seen; ALREADY_EXISTS for a tag filed
  // twice; RESOURCE_EXHAUSTED when the buffered bytes or messages would pass
  // their limit.
  // Nothing is filed on error.
  absl::Status Deliver(int64_t generation, const RingTag& tag,
                       RingPayload payload);

  // Waits for (generation, tag) and removes it from the box. Errors:
  // DEADLINE_EXCEEDED at `deadline`; CANCELLED when a newer generation
  // arrived, when Fail() was called for this generation, or after Close();
  // the failure's status when the sender's stream broke (see Fail()).
  absl::StatusOr<RingPayload> Take(int64_t generation, const RingTag& tag,
                                   absl::Time deadline);

  // Attaches the shared-memory link of `generation` under `key` (moving
  // to it if newer; replacing a link under it whose sender is gone).
  // ABORTED for an older generation; ALREADY_EXISTS while a link under
  // `key` still has its sender (one link per sender and ring: another
  // transport of the same sender keeps its stream).
  absl::Status AttachLink(int64_t generation, const std::string& key,
                          std::shared_ptr<ShmLinkReader> link);
  // What TakeOrLink found: the message filed, or the link to read it from.
  struct Arrival {
    std::optional<RingPayload> payload;
    std::shared_ptr<ShmLinkReader> link;  // held until ReleaseLink()
  };
  // Take(), also done when the generation has a link under `key` that no
  // other taker holds: then returns the link, held by this caller until
  // ReleaseLink(key). A message filed meanwhile comes first; the link is
  // handed out even when the generation failed (what arrived before the
  // failure stays readable, and the link reports the failure itself).
  absl::StatusOr<Arrival> TakeOrLink(int64_t generation, const RingTag& tag,
                                     const std::string& key,
                                     absl::Time deadline);
  void ReleaseLink(const std::string& key);
  // Removes `link` from under `key` (its sender went and it is drained:
  // the messages come by the stream now). No-op for another link.
  void DetachLink(const std::string& key, const ShmLinkReader* link);
  // Whether (generation, tag) is filed (a taker reading a link stops to
  // take it: Deliver nudges the links held).
  bool Filed(int64_t generation, const RingTag& tag) const;

  // Moves to `generation` (drops older messages) if it is newer than the
  // newest seen. Returns false if `generation` is older than the newest.
  bool Enter(int64_t generation);

  // Records that the stream of `generation` broke: waiting and later Take()
  // calls of that generation get `status` (if nothing is filed for them).
  void Fail(int64_t generation, absl::Status status);

  // Wakes every Take() with CANCELLED; later calls get CANCELLED too.
  void Close();

  int64_t buffered_bytes() const;

  // Whether a stream may read its next message now: true while the
  // unclaimed bytes are under the read-ahead bound or a Take() waits for a
  // message not filed (or after Close). Otherwise keeps `resume`, under
  // `*token`, and calls it once, without the lock, on the thread of the
  // Take, Enter, Fail or Close that lets reading go on.
  bool MayReadOn(std::function<void()> resume, int64_t* token);
  // Drops the `resume` kept under `token`; false when it was called or is
  // being called already (the stream then reads on through it).
  bool CancelResume(int64_t token);
  // Times a stream paused, and the most unclaimed bytes held at once.
  int64_t paused_reads() const;
  int64_t peak_buffered_bytes() const;

 private:
  using Resumes = std::vector<std::function<void()>>;
  bool EnterLocked(int64_t generation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ReadingMayGoOnLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The kept resumes when reading may go on (none otherwise), removed.
  Resumes TakeResumesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<RingPayload> TakeFiledLocked(int64_t generation,
                                              const RingTag& tag)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `key`: also done when its link is free (null: never).
  absl::StatusOr<Arrival> TakeImpl(int64_t generation, const RingTag& tag,
                                   absl::Time deadline, const std::string* key);
  // Drops every link (interrupting their readers with `why`).
  void DropLinksLocked(const absl::Status& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t max_buffered_bytes_;
  const int64_t max_messages_;
  const int64_t read_ahead_bytes_;
  mutable absl::Mutex mu_;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = -1;
  std::map<RingTag, RingPayload> messages_ ABSL_GUARDED_BY(mu_);
  int64_t buffered_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  struct HeldLink {
    std::shared_ptr<ShmLinkReader> link;
    bool held = false;  // by a taker, until ReleaseLink
  };
  // generation_'s links, by key.
  std::map<std::string, HeldLink> links_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int missing_waiters_ ABSL_GUARDED_BY(mu_) = 0;  // Take()s of unfiled tags
  std::map<int64_t, std::function<void()>> resumes_ ABSL_GUARDED_BY(mu_);
  int64_t next_token_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t paused_reads_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t peak_buffered_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ferry

#endif  // FERRY_RING_RING_MAILBOX_H_

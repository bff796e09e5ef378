// A shared-memory link from one ring rank to the next on the same host:
// a single-producer single-consumer ring of bytes in a POSIX shared-memory
// object (common/shared_memory.h) that carries ring messages (a frame with
// the tag and the length, then the payload), so a piece crosses with one
// copy in (the sender's) and one read out (the receiver adds or copies
// straight from the link into its buffer), against loopback TCP's two
// kernel copies and gRPC's framing. Both ends sleep on futexes in the
// segment when the ring is empty or full and wake the other only when it
// sleeps. No gRPC types; GrpcRingTransport decides when a link is used.
//
// Layout: a control block (magic, version, capacity, the 16-byte nonce the
// receiver checks, then the producer's and the consumer's counters on
// their own cache lines), then `capacity` bytes of ring. Frames and
// payloads are padded to 8 bytes, so a float never straddles the wrap.
//
// Each end holds an open-file-description record lock on its own byte of
// the object (the writer byte 0, the reader byte 1) for as long as it has
// the link; the kernel drops it when the process dies. An end that would
// sleep first looks for the other's lock: gone (the process died, or its
// end was destroyed) is UNAVAILABLE, after what was already in the ring
// has been read. So a dead neighbour fails the collective within a sleep
// (200 ms), whatever happens to the stream beside the link.
//
// What the other process writes is not trusted: counters that do not add
// up or a frame without its magic are DATA_LOSS, after which the end
// refuses every call.
//
// Thread safety: one thread writes at a time (ShmLinkWriter), one reads at
// a time (ShmLinkReader: callers hold Acquire()); Interrupt may be called
// from any thread.
#ifndef FERRY_RING_SHM_LINK_H_
#define FERRY_RING_SHM_LINK_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/shared_memory.h"
#include "ring/ring_transport.h"

namespace ferry {

using ShmLinkNonce = std::array<uint8_t, 16>;

// The object-name prefix of ring links; a name is it plus 32 hex digits.
inline constexpr char kShmLinkPrefix[] = "/ferry-ring-";
// Whether `name` is one a ring link could have (what a receiver opens).
bool IsShmLinkName(const std::string& name);
// Removes the ring links a killed sender left named in /dev/shm: objects
// named as links (IsShmLinkName) that this user may open, last sized at
// least `min_age` ago (their mtime), and that no process holds a lock on (a
// live writer holds its byte from creation until it unlinks the name, so an
// unlocked named object is one whose sender died between creating it and its
// receiver's answer). Returns how many it removed; a listing or an object
// it cannot read is left alone.
int SweepStaleShmLinks(absl::Duration min_age);

// What a receiver files a link under: its sender and the ring it serves
// (the CRC32C of the ring's worker ids in rank order, each followed by
// '\n'), since one sender may feed a receiver on two rings (a pipeline's
// forward and backward ring).
std::string ShmLinkKey(const std::string& sender, uint32_t ring_fingerprint);

// Bytes of the object for a ring of `capacity` bytes.
size_t ShmLinkBytes(int64_t capacity);
// INVALID_ARGUMENT unless 64 KiB <= capacity <= 1 GiB, a multiple of 8.
absl::Status CheckShmLinkCapacity(int64_t capacity);

// What a frame says of the message behind it.
struct ShmLinkMessage {
  RingTag tag;
  bool encoded = false;  // an opaque payload (SendBytes), not floats
  int64_t bytes = 0;
};

// The state both ends keep besides the segment: an interrupt that wakes a
// waiting end and fails its calls.
class ShmLinkEnd {
 public:
  // Wakes a waiting call and makes it and every later one return `why`.
  void Interrupt(absl::Status why);
  // Wakes a waiting call to look at its stop condition (Peek's `stop`).
  void Nudge();
  // Whether the other end still holds the link (its lock).
  bool PeerHolds() const;
  // The control block's layout (ring/shm_link.cc).
  struct Control;

 protected:
  ShmLinkEnd(std::unique_ptr<SharedMemorySegment> segment, int own_byte);
  // Takes this end's lock (the system's error when it cannot).
  absl::Status LockOwnByte();
  ~ShmLinkEnd();
  SharedMemorySegment& segment() const { return *segment_; }
  Control* control() const { return control_; }
  char* ring() const { return ring_; }
  int64_t capacity() const;
  // The interrupt's status, or OK.
  absl::Status interrupted() const;
  // Sleeps until `ready()` holds, on `seq` (bumped by the other end after
  // each change, and by Interrupt), announcing the sleep in `sleeping`.
  // DEADLINE_EXCEEDED at `deadline`; the interrupt's status.
  // `stop` (may be empty): checked on each wake; true ends the wait with
  // ABORTED "stopped". The other end gone ends it with UNAVAILABLE and
  // sets peer_gone().
  absl::Status WaitUntil(const std::function<bool()>& ready,
                         std::atomic<uint32_t>* seq,
                         std::atomic<uint32_t>* sleeping, absl::Time deadline,
                         const char* what,
                         const std::function<bool()>& stop = nullptr);
  std::atomic<bool> peer_gone_{false};
  // Copies between the ring at stream position `at` and `data`, across
  // the wrap.
  void CopyIn(uint64_t at, const void* data, size_t bytes);
  void CopyOut(uint64_t at, void* data, size_t bytes) const;

 private:
  const std::unique_ptr<SharedMemorySegment> segment_;
  const int own_byte_;  // 0: the writer's, 1: the reader's
  Control* const control_;
  char* const ring_;
  std::atomic<bool> interrupted_{false};
  mutable absl::Mutex mu_;
  absl::Status why_ ABSL_GUARDED_BY(mu_);
};

class ShmLinkWriter final : public ShmLinkEnd {
 public:
  // Creates the object (kShmLinkPrefix + random) with a ring of `capacity`
  // bytes and a fresh nonce. The system's errors (RESOURCE_EXHAUSTED:
  // /dev/shm full), INVALID_ARGUMENT for a bad capacity.
  static absl::StatusOr<std::unique_ptr<ShmLinkWriter>> Create(
      int64_t capacity);

  const std::string& name() const { return segment().name(); }
  const ShmLinkNonce& nonce() const { return nonce_; }
  // Removes the object's name once the receiver has it mapped (or will
  // not): nothing is left in /dev/shm when either process dies.
  void Unlink();

  // Writes one message: its frame, then `bytes` of `data`, as space frees
  // (the receiver reads while it is written). Waits while the ring is full
  // until `deadline`. Errors: DEADLINE_EXCEEDED, the interrupt's status,
  // DATA_LOSS when the receiver's counter is impossible.
  absl::Status Write(const RingTag& tag, bool encoded, const void* data,
                     int64_t bytes, absl::Time deadline);

 private:
  ShmLinkWriter(std::unique_ptr<SharedMemorySegment> segment,
                const ShmLinkNonce& nonce);
  // Waits for `bytes` of free space (<= capacity).
  absl::Status WaitForSpace(uint64_t bytes, absl::Time deadline);
  void Publish(uint64_t head);

  const ShmLinkNonce nonce_;
  uint64_t head_ = 0;  // bytes written (this end's copy)
};

class ShmLinkReader final : public ShmLinkEnd {
 public:
  // Maps the object `name` with a ring of `capacity` bytes and checks that
  // it is a link holding `nonce`. NOT_FOUND when there is no such object
  // here (another host, another /dev/shm); INVALID_ARGUMENT for a name
  // that is not a link's; FAILED_PRECONDITION when the object is not the
  // link offered (size, magic, version, capacity or nonce differ).
  static absl::StatusOr<std::unique_ptr<ShmLinkReader>> Open(
      const std::string& name, int64_t capacity, const ShmLinkNonce& nonce);

  // One reader at a time: false when another still holds it at `deadline`.
  bool Acquire(absl::Time deadline);
  void Release();

  // Waits for the next message's frame (until `deadline`) and returns it;
  // the same one until Consume. Errors: DEADLINE_EXCEEDED, the
  // interrupt's status, DATA_LOSS; ABORTED when `stop` (checked whenever
  // the wait wakes, Nudge) returned true; UNAVAILABLE once the sender is
  // gone and everything it wrote was read (then sender_gone()).
  absl::StatusOr<ShmLinkMessage> Peek(
      absl::Time deadline, const std::function<bool()>& stop = nullptr);
  bool sender_gone() const { return peer_gone_.load(); }
  // Hands the peeked message's payload to `sink` in order, in pieces as
  // they arrive (each a multiple of 4 bytes but maybe the last), freeing
  // the ring behind it; then the next frame may be peeked. Errors: Peek's;
  // the message is then lost and the link unusable.
  absl::Status Consume(
      const std::function<void(const char* data, size_t bytes)>& sink,
      absl::Time deadline);

 private:
  explicit ShmLinkReader(std::unique_ptr<SharedMemorySegment> segment);
  // Waits until at least `bytes` are published beyond tail_.
  absl::Status WaitForData(uint64_t bytes, absl::Time deadline,
                           const std::function<bool()>& stop = nullptr);
  void Free(uint64_t tail);

  uint64_t tail_ = 0;  // bytes consumed (this end's copy)
  bool peeked_ = false;
  ShmLinkMessage message_;
  absl::Mutex use_mu_;
  bool in_use_ ABSL_GUARDED_BY(use_mu_) = false;
  absl::Status broken_;  // DATA_LOSS once seen
};

}  // namespace ferry

#endif  // FERRY_RING_SHM_LINK_H_

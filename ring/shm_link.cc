#include "ring/shm_link.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/futex.h"
#include "common/posix_io.h"

namespace ferry {
namespace {

constexpr uint64_t kMagic = 0x4b4e494c4d485346;  // "FSHMLINK"
constexpr uint32_t kVersion = 1;
constexpr uint64_t kFrameMagic = 0x454d415246525346;  // "FSRFRAME"
constexpr size_t kControlBytes = 256;
// What one publish or one free covers at most: the other end starts on a
// piece while the rest of it is still copied.
constexpr uint64_t kStrideBytes = 256 << 10;
// A waiting end looks at its interrupt at least this often.
constexpr absl::Duration kMaxSleep = absl::Milliseconds(200);

uint64_t Padded(uint64_t bytes) { return (bytes + 7) & ~uint64_t{7}; }

// A message's frame in the ring (32 bytes).
struct Frame {
  uint64_t magic;
  int64_t op_id;
  int32_t stage;
  int32_t piece;
  uint32_t encoded;
  uint32_t bytes_high;
  uint32_t bytes_low;
  uint32_t reserved;
};
static_assert(sizeof(Frame) == 40);
constexpr uint64_t kFrameBytes = sizeof(Frame);

// Stores an end's new count, bumps the word the other end sleeps on, and
// wakes it if it announced a sleep (sequentially consistent throughout:
// the sleeper announces, then looks at the count; this end stores the
// count, then looks at the announcement; one of them sees the other).
void Advance(std::atomic<uint64_t>* count, uint64_t value,
             std::atomic<uint32_t>* seq,
             const std::atomic<uint32_t>& sleeping) {
  count->store(value);
  seq->fetch_add(1);
  if (sleeping.load() != 0) FutexWakeAll(seq);
}

}  // namespace

struct ShmLinkEnd::Control {
  uint64_t magic;
  uint32_t version;
  uint32_t reserved;
  int64_t capacity;
  ShmLinkNonce nonce;
  // The producer's line: bytes published, bumped with each publish.
  alignas(64) std::atomic<uint64_t> head;
  std::atomic<uint32_t> data_seq;
  std::atomic<uint32_t> reader_sleeping;
  // The consumer's line: bytes freed, bumped with each free.
  alignas(64) std::atomic<uint64_t> tail;
  std::atomic<uint32_t> space_seq;
  std::atomic<uint32_t> writer_sleeping;
};
static_assert(sizeof(ShmLinkEnd::Control) <= kControlBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

bool IsShmLinkName(const std::string& name) {
  const size_t prefix = sizeof(kShmLinkPrefix) - 1;
  if (name.size() != prefix + 32 || name.compare(0, prefix, kShmLinkPrefix)) {
    return false;
  }
  return std::all_of(name.begin() + prefix, name.end(), [](char c) {
    return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f');
  });
}

namespace {

// Whether another open file description (this process's or another's)
// holds a record lock on bytes [start, start + len) of `fd`'s object; an
// error reads as held, so nothing is taken for gone on a failed query.
bool AnyLockOn(int fd, off_t start, off_t len) {
  struct flock lock = {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = start;
  lock.l_len = len;
  if (fcntl(fd, F_OFD_GETLK, &lock) != 0) return true;
  return lock.l_type != F_UNLCK;
}

}  // namespace

int SweepStaleShmLinks(absl::Duration min_age) {
  DIR* dir = opendir("/dev/shm");  // where glibc's shm_open keeps objects
  if (dir == nullptr) return 0;
  int removed = 0;
  while (const dirent* entry = readdir(dir)) {
    const std::string name = absl::StrCat("/", entry->d_name);
    if (!IsShmLinkName(name)) continue;
    const int fd = shm_open(name.c_str(), O_RDWR, 0);
    if (fd < 0) continue;  // gone meanwhile, or another user's
    Fd closer(fd);
    struct stat st;
    if (fstat(fd, &st) != 0 ||
        absl::Now() - absl::TimeFromTimespec(st.st_mtim) < min_age) {
      continue;
    }
    if (AnyLockOn(fd, 0, 2)) continue;  // the writer's byte, the reader's
    if (shm_unlink(name.c_str()) == 0) ++removed;
  }
  closedir(dir);
  return removed;
}

std::string ShmLinkKey(const std::string& sender, uint32_t ring_fingerprint) {
  return absl::StrFormat("%s/%08x", sender, ring_fingerprint);
}

size_t ShmLinkBytes(int64_t capacity) {
  return kControlBytes + static_cast<size_t>(capacity);
}

absl::Status CheckShmLinkCapacity(int64_t capacity) {
  if (capacity < (64 << 10) || capacity > (int64_t{1} << 30) ||
      capacity % 8 != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a shared-memory link's ring of %d bytes: it takes 64 KiB to 1 GiB, "
        "a multiple of 8",
        capacity));
  }
  return absl::OkStatus();
}

ShmLinkEnd::ShmLinkEnd(std::unique_ptr<SharedMemorySegment> segment,
                       int own_byte)
    : segment_(std::move(segment)),
      own_byte_(own_byte),
      control_(static_cast<Control*>(segment_->data())),
      ring_(static_cast<char*>(segment_->data()) + kControlBytes) {}

ShmLinkEnd::~ShmLinkEnd() = default;

absl::Status ShmLinkEnd::LockOwnByte() {
  struct flock lock = {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = own_byte_;
  lock.l_len = 1;
  if (fcntl(segment_->fd(), F_OFD_SETLK, &lock) != 0) {
    return ErrnoError(errno, "lock", segment_->name());
  }
  return absl::OkStatus();
}

bool ShmLinkEnd::PeerHolds() const {
  return AnyLockOn(segment_->fd(), 1 - own_byte_, 1);
}

int64_t ShmLinkEnd::capacity() const {
  return static_cast<int64_t>(segment_->size() - kControlBytes);
}

void ShmLinkEnd::Interrupt(absl::Status why) {
  {
    absl::MutexLock lock(&mu_);
    if (interrupted_.load()) return;
    why_ = std::move(why);
    interrupted_.store(true);
  }
  control_->data_seq.fetch_add(1);
  control_->space_seq.fetch_add(1);
  FutexWakeAll(&control_->data_seq);
  FutexWakeAll(&control_->space_seq);
}

void ShmLinkEnd::Nudge() {
  control_->data_seq.fetch_add(1);
  FutexWakeAll(&control_->data_seq);
}

absl::Status ShmLinkEnd::interrupted() const {
  if (!interrupted_.load()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  return why_;
}

absl::Status ShmLinkEnd::WaitUntil(const std::function<bool()>& ready,
                                   std::atomic<uint32_t>* seq,
                                   std::atomic<uint32_t>* sleeping,
                                   absl::Time deadline, const char* what,
                                   const std::function<bool()>& stop) {
  for (;;) {
    if (ready()) return absl::OkStatus();
    if (absl::Status s = interrupted(); !s.ok()) return s;
    if (stop && stop()) return absl::AbortedError("stopped");
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrFormat("the shared-memory link %s: %s by the deadline",
                          segment_->name(), what));
    }
    if (!PeerHolds()) {
      peer_gone_.store(true);
      return absl::UnavailableError(absl::StrFormat(
          "the shared-memory link %s: its %s is gone (%s)", segment_->name(),
          own_byte_ == 0 ? "receiver" : "sender", what));
    }
    // Announce the sleep, then look again: the other end bumps `seq`
    // after each change and wakes only a sleeper it sees announced.
    const uint32_t before = seq->load();
    sleeping->store(1);
    if (!ready() && interrupted().ok()) {
      FutexWait(seq, before, std::min(deadline - now, kMaxSleep));
    }
    sleeping->store(0);
  }
}

void ShmLinkEnd::CopyIn(uint64_t at, const void* data, size_t bytes) {
  const uint64_t cap = static_cast<uint64_t>(capacity());
  const uint64_t offset = at % cap;
  const size_t first =
      static_cast<size_t>(std::min<uint64_t>(bytes, cap - offset));
  std::memcpy(ring_ + offset, data, first);
  if (first < bytes) {
    std::memcpy(ring_, static_cast<const char*>(data) + first, bytes - first);
  }
}

void ShmLinkEnd::CopyOut(uint64_t at, void* data, size_t bytes) const {
  const uint64_t cap = static_cast<uint64_t>(capacity());
  const uint64_t offset = at % cap;
  const size_t first =
      static_cast<size_t>(std::min<uint64_t>(bytes, cap - offset));
  std::memcpy(data, ring_ + offset, first);
  if (first < bytes) {
    std::memcpy(static_cast<char*>(data) + first, ring_, bytes - first);
  }
}

// ---------------------------------------------------------------- writer

absl::StatusOr<std::unique_ptr<ShmLinkWriter>> ShmLinkWriter::Create(
    int64_t capacity) {
  if (absl::Status s = CheckShmLinkCapacity(capacity); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<SharedMemorySegment>> segment =
      SharedMemorySegment::Create(kShmLinkPrefix, ShmLinkBytes(capacity));
  if (!segment.ok()) return segment.status();
  ShmLinkNonce nonce;
  absl::BitGen random;
  for (uint8_t& b : nonce) b = absl::Uniform<uint8_t>(random);
  auto* control = new ((*segment)->data()) Control{};
  control->capacity = capacity;
  control->nonce = nonce;
  control->version = kVersion;
  // The magic last: a reader that sees it sees the rest.
  std::atomic_ref<uint64_t>(control->magic).store(kMagic);
  auto writer = std::unique_ptr<ShmLinkWriter>(
      new ShmLinkWriter(*std::move(segment), nonce));
  if (absl::Status s = writer->LockOwnByte(); !s.ok()) return s;
  return writer;
}

ShmLinkWriter::ShmLinkWriter(std::unique_ptr<SharedMemorySegment> segment,
                             const ShmLinkNonce& nonce)
    : ShmLinkEnd(std::move(segment), /*own_byte=*/0), nonce_(nonce) {}

void ShmLinkWriter::Unlink() { segment().Unlink(); }

absl::Status ShmLinkWriter::WaitForSpace(uint64_t bytes, absl::Time deadline) {
  const uint64_t cap = static_cast<uint64_t>(capacity());
  bool impossible = false;
  absl::Status s = WaitUntil(
      [&] {
        const uint64_t tail = control()->tail.load(std::memory_order_acquire);
        if (tail > head_ || head_ - tail > cap) {
          impossible = true;
          return true;
        }
        return cap - (head_ - tail) >= bytes;
      },
      &control()->space_seq, &control()->writer_sleeping, deadline,
      "the receiver freed no space");
  if (impossible) {
    return absl::DataLossError(absl::StrFormat(
        "the shared-memory link %s: the receiver's counter is impossible",
        name()));
  }
  return s;
}

void ShmLinkWriter::Publish(uint64_t head) {
  head_ = head;
  Advance(&control()->head, head, &control()->data_seq,
          control()->reader_sleeping);
}

absl::Status ShmLinkWriter::Write(const RingTag& tag, bool encoded,
                                  const void* data, int64_t bytes,
                                  absl::Time deadline) {
  if (absl::Status s = interrupted(); !s.ok()) return s;
  if (bytes < 0) return absl::InvalidArgumentError("negative message size");
  const uint64_t size = static_cast<uint64_t>(bytes);
  Frame frame{};
  frame.magic = kFrameMagic;
  frame.op_id = tag.op_id;
  frame.stage = tag.stage;
  frame.piece = tag.piece;
  frame.encoded = encoded ? 1 : 0;
  frame.bytes_high = static_cast<uint32_t>(size >> 32);
  frame.bytes_low = static_cast<uint32_t>(size);
  if (absl::Status s = WaitForSpace(kFrameBytes, deadline); !s.ok()) return s;
  CopyIn(head_, &frame, kFrameBytes);
  uint64_t head = head_ + kFrameBytes;
  // The frame goes with the first stride of the payload.
  const char* in = static_cast<const char*>(data);
  uint64_t done = 0;
  const uint64_t padded = Padded(size);
  const uint64_t cap = static_cast<uint64_t>(capacity());
  while (done < padded) {
    const uint64_t tail = control()->tail.load(std::memory_order_acquire);
    uint64_t space =
        tail <= head && head - tail <= cap ? cap - (head - tail) : 0;
    if (space == 0) {
      Publish(head);
      if (absl::Status s = WaitForSpace(8, deadline); !s.ok()) return s;
      continue;
    }
    const uint64_t n = std::min({space, padded - done, kStrideBytes});
    const uint64_t real = done < size ? std::min(n, size - done) : 0;
    if (real > 0) CopyIn(head, in + done, static_cast<size_t>(real));
    head += n;  // the padding's bytes are left as they are
    done += n;
    Publish(head);
  }
  if (head != head_) Publish(head);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- reader

absl::StatusOr<std::unique_ptr<ShmLinkReader>> ShmLinkReader::Open(
    const std::string& name, int64_t capacity, const ShmLinkNonce& nonce) {
  if (!IsShmLinkName(name)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("'%s' is not a ring link's name (%s + 32 hex digits)",
                        name, kShmLinkPrefix));
  }
  if (absl::Status s = CheckShmLinkCapacity(capacity); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<SharedMemorySegment>> segment =
      SharedMemorySegment::Open(name, ShmLinkBytes(capacity));
  if (!segment.ok()) return segment.status();
  const auto* control = static_cast<const Control*>((*segment)->data());
  if (std::atomic_ref<const uint64_t>(control->magic).load() != kMagic ||
      control->version != kVersion || control->capacity != capacity ||
      control->nonce != nonce) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "shared memory %s is not the ring link offered (magic, version, "
        "capacity or nonce differ)",
        name));
  }
  auto reader =
      std::unique_ptr<ShmLinkReader>(new ShmLinkReader(*std::move(segment)));
  if (absl::Status s = reader->LockOwnByte(); !s.ok()) return s;
  return reader;
}

ShmLinkReader::ShmLinkReader(std::unique_ptr<SharedMemorySegment> segment)
    : ShmLinkEnd(std::move(segment), /*own_byte=*/1) {}

bool ShmLinkReader::Acquire(absl::Time deadline) {
  absl::MutexLock lock(&use_mu_);
  if (!use_mu_.AwaitWithDeadline(
          absl::Condition(
              +[](bool* in_use) { return !*in_use; }, &in_use_),
          deadline)) {
    return false;
  }
  in_use_ = true;
  return true;
}

void ShmLinkReader::Release() {
  absl::MutexLock lock(&use_mu_);
  in_use_ = false;
}

absl::Status ShmLinkReader::WaitForData(uint64_t bytes, absl::Time deadline,
                                        const std::function<bool()>& stop) {
  const uint64_t cap = static_cast<uint64_t>(capacity());
  bool impossible = false;
  absl::Status s = WaitUntil(
      [&] {
        const uint64_t head = control()->head.load(std::memory_order_acquire);
        if (head < tail_ || head - tail_ > cap) {
          impossible = true;
          return true;
        }
        return head - tail_ >= bytes;
      },
      &control()->data_seq, &control()->reader_sleeping, deadline,
      "no message arrived", stop);
  if (impossible) {
    broken_ = absl::DataLossError(absl::StrFormat(
        "the shared-memory link %s: the sender's counter is impossible",
        segment().name()));
    return broken_;
  }
  return s;
}

void ShmLinkReader::Free(uint64_t tail) {
  tail_ = tail;
  Advance(&control()->tail, tail, &control()->space_seq,
          control()->writer_sleeping);
}

absl::StatusOr<ShmLinkMessage> ShmLinkReader::Peek(
    absl::Time deadline, const std::function<bool()>& stop) {
  if (!broken_.ok()) return broken_;
  if (peeked_) return message_;
  if (absl::Status s = WaitForData(kFrameBytes, deadline, stop); !s.ok()) {
    return s;
  }
  Frame frame;
  CopyOut(tail_, &frame, kFrameBytes);
  const uint64_t bytes =
      uint64_t{frame.bytes_high} << 32 | uint64_t{frame.bytes_low};
  if (frame.magic != kFrameMagic || frame.encoded > 1 ||
      bytes > (uint64_t{1} << 40)) {
    broken_ = absl::DataLossError(
        absl::StrFormat("the shared-memory link %s: a message frame is corrupt",
                        segment().name()));
    return broken_;
  }
  Free(tail_ + kFrameBytes);
  message_ = ShmLinkMessage{{frame.op_id, frame.stage, frame.piece},
                            frame.encoded == 1,
                            static_cast<int64_t>(bytes)};
  peeked_ = true;
  return message_;
}

absl::Status ShmLinkReader::Consume(
    const std::function<void(const char* data, size_t bytes)>& sink,
    absl::Time deadline) {
  if (!broken_.ok()) return broken_;
  if (!peeked_) {
    return absl::FailedPreconditionError("Consume without a peeked message");
  }
  const uint64_t size = static_cast<uint64_t>(message_.bytes);
  const uint64_t padded = Padded(size);
  const uint64_t cap = static_cast<uint64_t>(capacity());
  uint64_t done = 0;
  while (done < padded) {
    if (absl::Status s = WaitForData(8, deadline); !s.ok()) {
      if (broken_.ok()) {
        broken_ = absl::Status(
            s.code(), absl::StrCat("a message was cut off: ", s.message()));
      }
      return broken_;
    }
    const uint64_t head = control()->head.load(std::memory_order_acquire);
    uint64_t n = std::min({head - tail_, padded - done, kStrideBytes});
    // Up to the wrap, so that the sink gets one contiguous piece.
    const uint64_t offset = tail_ % cap;
    n = std::min(n, cap - offset);
    const uint64_t real = done < size ? std::min(n, size - done) : 0;
    if (real > 0) sink(ring() + offset, static_cast<size_t>(real));
    done += n;
    Free(tail_ + n);
  }
  peeked_ = false;
  return absl::OkStatus();
}

}  // namespace ferry

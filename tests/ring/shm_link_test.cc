// The shared-memory ring link on its own: a writer and a reader over two
// mappings of one POSIX shared-memory object, as two processes hold it.
#include "ring/shm_link.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "ring/ring_wire.h"
#include "ring/shm_link_sender.h"

namespace ferry {
namespace {

constexpr int64_t kShmCapacity = 64 << 10;  // the smallest ring: wraps often

struct ShmTestLink {
  std::unique_ptr<ShmLinkWriter> writer;
  std::unique_ptr<ShmLinkReader> reader;
};

ShmTestLink OpenShmLink(int64_t capacity = kShmCapacity) {
  ShmTestLink link;
  auto writer = ShmLinkWriter::Create(capacity);
  EXPECT_TRUE(writer.ok()) << writer.status();
  link.writer = *std::move(writer);
  auto reader =
      ShmLinkReader::Open(link.writer->name(), capacity, link.writer->nonce());
  EXPECT_TRUE(reader.ok()) << reader.status();
  link.reader = *std::move(reader);
  link.writer->Unlink();
  return link;
}

absl::Time ShmSoon() { return absl::Now() + absl::Seconds(30); }

std::string ShmBytes(int64_t n, int seed) {
  std::string s(static_cast<size_t>(n), '\0');
  for (int64_t i = 0; i < n; ++i)
    s[i] = static_cast<char>((i * 31 + seed) % 251);
  return s;
}

// Messages of every awkward size (empty, odd, larger than the ring) pass
// whole and in order while the two ends run concurrently.
TEST(ShmLinkTest, MessagesOfEverySizeArriveWholeAndInOrder) {
  ShmTestLink link = OpenShmLink();
  const std::vector<int64_t> sizes = {0,
                                      1,
                                      7,
                                      8,
                                      4 * 3,
                                      40,
                                      kShmCapacity,
                                      kShmCapacity - 8,
                                      300001,
                                      1 << 20,
                                      5 * kShmCapacity + 4};
  std::thread writer([&] {
    for (size_t m = 0; m < sizes.size(); ++m) {
      const std::string payload = ShmBytes(sizes[m], static_cast<int>(m));
      ASSERT_TRUE(link.writer
                      ->Write({7, 1, static_cast<int32_t>(m)}, m % 2 == 1,
                              payload.data(), sizes[m], ShmSoon())
                      .ok());
    }
  });
  for (size_t m = 0; m < sizes.size(); ++m) {
    auto message = link.reader->Peek(ShmSoon());
    ASSERT_TRUE(message.ok()) << message.status();
    EXPECT_EQ(message->tag, (RingTag{7, 1, static_cast<int32_t>(m)}));
    EXPECT_EQ(message->encoded, m % 2 == 1);
    ASSERT_EQ(message->bytes, sizes[m]);
    std::string got;
    ASSERT_TRUE(link.reader
                    ->Consume(
                        [&](const char* data, size_t n) {
                          if (message->bytes % 4 == 0) {
                            EXPECT_EQ(n % 4, 0u);  // whole floats
                          }
                          got.append(data, n);
                        },
                        ShmSoon())
                    .ok());
    EXPECT_EQ(got, ShmBytes(sizes[m], static_cast<int>(m))) << "message " << m;
  }
  writer.join();
}

TEST(ShmLinkTest, AnEmptyLinkWaitsUntilItsDeadline) {
  ShmTestLink link = OpenShmLink();
  const absl::Time start = absl::Now();
  auto message = link.reader->Peek(start + absl::Milliseconds(50));
  EXPECT_EQ(message.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(50));
}

// Interrupt wakes a reader waiting for a message and a writer waiting for
// space, with its status, long before their deadlines.
TEST(ShmLinkTest, InterruptWakesBothEnds) {
  ShmTestLink link = OpenShmLink();
  absl::Status read;
  std::thread reader([&] { read = link.reader->Peek(ShmSoon()).status(); });
  link.reader->Interrupt(absl::UnavailableError("the sender died"));
  reader.join();
  EXPECT_EQ(read.code(), absl::StatusCode::kUnavailable) << read;

  const std::string big = ShmBytes(3 * kShmCapacity, 1);  // nobody reads it
  absl::Status wrote;
  std::thread writer([&] {
    wrote = link.writer->Write({1, 0, 0}, false, big.data(),
                               static_cast<int64_t>(big.size()), ShmSoon());
  });
  link.writer->Interrupt(absl::CancelledError("aborted"));
  writer.join();
  EXPECT_EQ(wrote.code(), absl::StatusCode::kCancelled) << wrote;
  EXPECT_EQ(link.writer->Write({1, 0, 1}, false, nullptr, 0, ShmSoon()).code(),
            absl::StatusCode::kCancelled);
}

// An end whose other end went (its process died: the kernel drops its
// lock) reads what was written, then gets UNAVAILABLE, not a wait until
// its deadline.
TEST(ShmLinkTest, AnEndWhoseOtherEndWentIsUnavailable) {
  ShmTestLink link = OpenShmLink();
  const std::string payload = ShmBytes(100, 4);
  ASSERT_TRUE(
      link.writer->Write({1, 0, 0}, false, payload.data(), 100, ShmSoon())
          .ok());
  link.writer.reset();
  auto message = link.reader->Peek(ShmSoon());
  ASSERT_TRUE(message.ok()) << message.status();
  std::string got;
  ASSERT_TRUE(link.reader
                  ->Consume([&](const char* d, size_t n) { got.append(d, n); },
                            ShmSoon())
                  .ok());
  EXPECT_EQ(got, payload);
  const absl::Time start = absl::Now();
  EXPECT_EQ(link.reader->Peek(ShmSoon()).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));

  ShmTestLink other = OpenShmLink();
  other.reader.reset();
  const std::string big = ShmBytes(2 * kShmCapacity, 5);
  EXPECT_EQ(other.writer
                ->Write({1, 0, 0}, false, big.data(),
                        static_cast<int64_t>(big.size()), ShmSoon())
                .code(),
            absl::StatusCode::kUnavailable);
}

TEST(ShmLinkTest, AFullLinkWaitsUntilTheWritersDeadline) {
  ShmTestLink link = OpenShmLink();
  const std::string big = ShmBytes(2 * kShmCapacity, 2);
  const absl::Status s = link.writer->Write(
      {1, 0, 0}, false, big.data(), static_cast<int64_t>(big.size()),
      absl::Now() + absl::Milliseconds(50));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
}

TEST(ShmLinkTest, OpenRefusesWhatIsNotTheOfferedLink) {
  auto writer = ShmLinkWriter::Create(kShmCapacity);
  ASSERT_TRUE(writer.ok()) << writer.status();
  const std::string name = (*writer)->name();
  EXPECT_TRUE(IsShmLinkName(name)) << name;
  ShmLinkNonce other = (*writer)->nonce();
  other[3] ^= 1;
  EXPECT_EQ(ShmLinkReader::Open(name, kShmCapacity, other).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ShmLinkReader::Open(name, 2 * kShmCapacity, (*writer)->nonce())
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ShmLinkReader::Open("/etc-passwd", kShmCapacity, (*writer)->nonce())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ShmLinkReader::Open(name, 1000, (*writer)->nonce()).status().code(),
            absl::StatusCode::kInvalidArgument);
  (*writer)->Unlink();  // what a receiver finds on another host
  EXPECT_EQ(ShmLinkReader::Open(name, kShmCapacity, (*writer)->nonce())
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ShmLinkWriter::Create(1000).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// What the other process wrote is not trusted: a corrupt frame or an
// impossible counter is DATA_LOSS, and the link stays refused.
TEST(ShmLinkTest, CorruptFramesAndCountersAreDataLoss) {
  for (bool corrupt_counter : {false, true}) {
    auto writer = ShmLinkWriter::Create(kShmCapacity);
    ASSERT_TRUE(writer.ok());
    auto raw = SharedMemorySegment::Open((*writer)->name(),
                                         ShmLinkBytes(kShmCapacity));
    ASSERT_TRUE(raw.ok()) << raw.status();
    auto reader = ShmLinkReader::Open((*writer)->name(), kShmCapacity,
                                      (*writer)->nonce());
    ASSERT_TRUE(reader.ok());
    (*writer)->Unlink();
    const std::string payload = ShmBytes(64, 3);
    ASSERT_TRUE(
        (*writer)->Write({1, 0, 0}, false, payload.data(), 64, ShmSoon()).ok());
    char* base = static_cast<char*>((*raw)->data());
    if (corrupt_counter) {
      // The producer's counter (the first word of its cache line at 64).
      uint64_t huge = uint64_t{1} << 50;
      std::memcpy(base + 64, &huge, sizeof(huge));
    } else {
      base[256] ^= 0x5a;  // the first frame's magic
    }
    auto message = (*reader)->Peek(ShmSoon());
    EXPECT_EQ(message.status().code(), absl::StatusCode::kDataLoss)
        << message.status();
    EXPECT_EQ((*reader)->Peek(ShmSoon()).status().code(),
              absl::StatusCode::kDataLoss);
  }
}

// The sender's thread writes what Send, SendBorrowed and SendBytes queued,
// in order, while the caller goes on; WaitWritten covers the borrowed
// buffers; each message counts as the stream would carry it.
// Sets the object's mtime (when it was sized) to an hour ago.
void BackdateShm(int fd) {
  const timespec hour_ago = absl::ToTimespec(absl::Now() - absl::Hours(1));
  const timespec times[2] = {hour_ago, hour_ago};
  EXPECT_EQ(futimens(fd, times), 0) << std::strerror(errno);
}

// A named object as a sender killed during its offer leaves it (no lock
// held: the kernel dropped the dead process's), sized an hour ago.
std::string LeaveKilledSendersLink(const std::string& name) {
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  EXPECT_GE(fd, 0) << std::strerror(errno);
  EXPECT_EQ(ftruncate(fd, 4096), 0);
  BackdateShm(fd);
  close(fd);
  return name;
}

bool ShmExists(const std::string& name) {
  const int fd = shm_open(name.c_str(), O_RDONLY, 0);
  if (fd < 0) return false;
  close(fd);
  return true;
}

TEST(ShmLinkTest, TheSweepRemovesOnlyWhatKilledSendersLeft) {
  const std::string stale = LeaveKilledSendersLink(
      absl::StrCat(kShmLinkPrefix, "0123456789abcdef0123456789abcdef"));
  const std::string not_a_link =
      LeaveKilledSendersLink(absl::StrCat(kShmLinkPrefix, "test-other"));
  // A live writer whose offer is unanswered: named, its lock held.
  auto live = ShmLinkWriter::Create(kShmCapacity);
  ASSERT_TRUE(live.ok()) << live.status();
  {
    const int fd = shm_open((*live)->name().c_str(), O_RDWR, 0);
    ASSERT_GE(fd, 0);
    BackdateShm(fd);
    close(fd);
  }
  EXPECT_EQ(SweepStaleShmLinks(absl::Hours(2)), 0);  // younger than that
  EXPECT_TRUE(ShmExists(stale));
  EXPECT_GE(SweepStaleShmLinks(absl::Minutes(10)), 1);
  EXPECT_FALSE(ShmExists(stale));
  EXPECT_TRUE(ShmExists((*live)->name()));
  EXPECT_TRUE(ShmExists(not_a_link));
  shm_unlink(not_a_link.c_str());
}

TEST(ShmLinkSenderTest, WritesTheQueueInOrderAndCountsLikeTheStream) {
  ShmTestLink link = OpenShmLink();
  ByteCounter counter;
  ShmLinkSender sender(std::move(link.writer), &counter, "rank 1");
  std::vector<float> big(100000, 2.0f);  // 400 KB: 6 rings' worth
  const std::vector<float> small = {1.0f, 2.0f, 3.0f};
  ASSERT_TRUE(sender.SendBorrowed({1, 0, 0}, big.data(), 100000).ok());
  ASSERT_TRUE(sender.Send({1, 0, 1}, small.data(), 3).ok());
  ASSERT_TRUE(sender.SendBytes({1, 0, 2}, "xyz").ok());
  std::vector<std::string> got;
  for (int m = 0; m < 3; ++m) {
    auto message = link.reader->Peek(ShmSoon());
    ASSERT_TRUE(message.ok()) << message.status();
    EXPECT_EQ(message->tag, (RingTag{1, 0, m}));
    got.emplace_back();
    ASSERT_TRUE(
        link.reader
            ->Consume([&](const char* d, size_t n) { got.back().append(d, n); },
                      ShmSoon())
            .ok());
  }
  ASSERT_TRUE(sender.WaitWritten(ShmSoon()));
  EXPECT_EQ(got[0].size(), 400000u);
  EXPECT_EQ(got[1],
            std::string(reinterpret_cast<const char*>(small.data()), 12));
  EXPECT_EQ(got[2], "xyz");
  EXPECT_EQ(counter.Get().sent, RingMessageWireBytes({1, 0, 0}, 400000, false) +
                                    RingMessageWireBytes({1, 0, 1}, 12, false) +
                                    RingMessageWireBytes({1, 0, 2}, 3, true));
}

// Failing the link (its stream ended, the transport aborted) stops the
// write in progress, drops what is queued, releases the borrowed buffers
// and refuses later sends with the reason.
TEST(ShmLinkSenderTest, FailStopsTheWriteAndRefusesLaterSends) {
  ShmTestLink link = OpenShmLink();
  ByteCounter counter;
  ShmLinkSender sender(std::move(link.writer), &counter, "rank 1");
  std::vector<float> big(1 << 20, 1.0f);  // 4 MiB: blocks on the 64 KiB ring
  ASSERT_TRUE(sender.SendBorrowed({1, 0, 0}, big.data(), big.size()).ok());
  ASSERT_TRUE(sender.SendBorrowed({1, 0, 1}, big.data(), big.size()).ok());
  EXPECT_FALSE(sender.WaitWritten(absl::Now() + absl::Milliseconds(20)));
  sender.Fail(absl::UnavailableError("the link to rank 1 ended"));
  EXPECT_TRUE(sender.WaitWritten(ShmSoon()));
  EXPECT_EQ(sender.Send({1, 0, 2}, big.data(), 1).code(),
            absl::StatusCode::kUnavailable);
  sender.Close(absl::Seconds(1));
}

}  // namespace
}  // namespace ferry

// The ring collectives over the real gRPC transport: N peer servers on
// loopback in one process, one thread per rank.
#include "ring/grpc_ring_transport.h"

#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/peer_limits.h"
#include "gtest/gtest.h"
#include "ring/ring_collective.h"
#include "ring/ring_peer_service.h"
#include "ring/ring_wire.h"
#include "tests/testing/wait_until.h"

namespace ferry {
namespace {

constexpr char kJob[] = "ring-test";

struct Ring {
  std::vector<std::unique_ptr<RingPeerServer>> peers;
  std::vector<RingMemberAddress> members;
  bool shared_memory = false;  // transports offer shared-memory links
  int64_t shared_memory_bytes = kDefaultRingShmBytes;
  LinkShaper* shaper = nullptr;

  explicit Ring(int n) {
    for (int r = 0; r < n; ++r) {
      auto peer = StartRingPeerServer("127.0.0.1:0");
      EXPECT_TRUE(peer.ok()) << peer.status();
      (*peer)->service->set_job_id(kJob);
      members.push_back(
          {absl::StrCat("w", r), absl::StrCat("127.0.0.1:", (*peer)->port)});
      peers.push_back(std::move(*peer));
    }
  }

  // `order` (when given): the ring's members in rank order by index into
  // `members` (a pipeline's backward ring reverses them); `rank` is then
  // the position in it.
  std::unique_ptr<GrpcRingTransport> Transport(
      int rank, int64_t generation = 1, const std::string& job = kJob,
      const std::vector<int>& order = {}) {
    GrpcRingTransportOptions o;
    o.job_id = job;
    o.generation = generation;
    o.rank = rank;
    o.ring = members;
    int peer = rank;
    if (!order.empty()) {
      o.ring.clear();
      for (int m : order) o.ring.push_back(members[m]);
      peer = order[rank];
    }
    o.mailbox = peers[peer]->mailbox.get();
    o.counter = peers[peer]->counter.get();
    o.shared_memory = shared_memory;
    o.shared_memory_bytes = shared_memory_bytes;
    o.shaper = shaper;
    auto t = GrpcRingTransport::Create(o);
    EXPECT_TRUE(t.ok()) << t.status();
    return std::move(*t);
  }
};

// Runs AllReduceSum on ranks [0, participants) of an n-rank ring.
// `transports` (when given) receives them, to look at afterwards.
std::vector<absl::Status> AllReduce(
    Ring& ring, int n, int participants, int64_t count,
    std::vector<std::vector<float>>& data, absl::Duration timeout,
    int64_t piece = 1000,
    std::vector<std::unique_ptr<GrpcRingTransport>>* kept = nullptr) {
  std::vector<absl::Status> results(n);
  std::vector<std::unique_ptr<GrpcRingTransport>> own;
  std::vector<std::unique_ptr<GrpcRingTransport>>& transports =
      kept != nullptr ? *kept : own;
  for (int r = 0; r < n; ++r) transports.push_back(ring.Transport(r));
  data.assign(n, std::vector<float>(count));
  std::vector<std::thread> threads;
  for (int r = 0; r < participants; ++r) {
    for (int64_t i = 0; i < count; ++i)
      data[r][i] = static_cast<float>((r + 1) * (i % 7));
    threads.emplace_back([&, r] {
      RingCollective collective(transports[r].get(), {piece, timeout});
      results[r] = collective.AllReduceSum(/*op_id=*/1, data[r].data(), count);
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

TEST(GrpcRingTransportTest, AllReduceOverLoopbackSumsOnEveryRank) {
  // 3 and 4 ranks: the all-gather forwards received pieces as they came.
  for (int n : {1, 2, 3, 4}) {
    for (int64_t count : {int64_t{0}, int64_t{7}, int64_t{10007}}) {
      Ring ring(n);
      std::vector<std::vector<float>> data;
      auto results = AllReduce(ring, n, n, count, data, absl::Seconds(20));
      const float rank_sum = n * (n + 1) / 2.0f;
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(results[r].ok())
            << "n=" << n << " rank " << r << ": " << results[r];
        for (int64_t i = 0; i < count; ++i) {
          ASSERT_EQ(data[r][i], rank_sum * (i % 7))
              << "n=" << n << " rank " << r << " i=" << i;
        }
      }
    }
  }
}

// SendBorrowed sends from the caller's buffer: once WaitSent returns, the
// buffer may change without changing what the next rank receives.
TEST(GrpcRingTransportTest, ABorrowedBufferMayChangeOnceWaitSentReturns) {
  Ring ring(2);
  auto sender = ring.Transport(0);
  auto receiver = ring.Transport(1);
  constexpr int64_t kCount = 2 << 20;  // 8 MiB a message
  constexpr int kMessages = 4;
  std::vector<float> buffer(kCount);
  for (int m = 0; m < kMessages; ++m) {
    for (int64_t i = 0; i < kCount; ++i)
      buffer[i] = static_cast<float>(m + i % 5);
    ASSERT_TRUE(sender->SendBorrowed({1, 0, m}, buffer.data(), kCount).ok());
    ASSERT_TRUE(sender->WaitSent(absl::Now() + absl::Seconds(20)).ok());
    std::fill(buffer.begin(), buffer.end(), -1.0f);  // the next one's, early
  }
  std::vector<float> got(kCount);
  for (int m = 0; m < kMessages; ++m) {
    ASSERT_TRUE(receiver
                    ->Recv({1, 0, m}, got.data(), kCount, RecvOp::kCopy,
                           absl::Now() + absl::Seconds(20))
                    .ok());
    for (int64_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(got[i], static_cast<float>(m + i % 5)) << m << " " << i;
    }
  }
  // Nothing borrowed is pending: WaitSent returns at once.
  EXPECT_TRUE(sender->WaitSent(absl::Now()).ok());
}

// Sends kAheadMessages pieces of 1 MiB, borrowed from `buffer`, to rank 1,
// which takes none, and waits until its stream paused at the read-ahead
// bound.
constexpr int64_t kAheadPiece = 1 << 18;  // floats: 1 MiB
constexpr int kAheadMessages = 48;        // past the 32 MiB bound
void SendAheadUntilPaused(Ring& ring, GrpcRingTransport& sender,
                          std::vector<float>& buffer) {
  buffer.resize(kAheadPiece * kAheadMessages);
  for (int64_t i = 0; i < static_cast<int64_t>(buffer.size()); ++i) {
    buffer[i] = static_cast<float>(i / kAheadPiece + i % 5);
  }
  for (int m = 0; m < kAheadMessages; ++m) {
    ASSERT_TRUE(sender
                    .SendBorrowed({1, 0, m}, buffer.data() + m * kAheadPiece,
                                  kAheadPiece)
                    .ok());
  }
  const RingMailbox& box = *ring.peers[1]->mailbox;
  ASSERT_TRUE(testutil::WaitUntil("rank 1's stream to pause at the bound", [&] {
                return box.paused_reads() > 0;
              }).ok());
}

// A receiver whose collective falls behind holds at most the read-ahead
// bound (and the message in hand) of its neighbour's pieces; the rest wait
// in the sender's (borrowed) buffers, and nothing is lost.
TEST(GrpcRingTransportTest, AReceiverBehindHoldsOnlyItsReadAhead) {
  Ring ring(2);
  auto sender = ring.Transport(0);
  auto receiver = ring.Transport(1);
  std::vector<float> buffer;
  SendAheadUntilPaused(ring, *sender, buffer);
  const RingMailbox& box = *ring.peers[1]->mailbox;
  const int64_t bound = kDefaultRingReadAheadBytes + kAheadPiece * 4;
  EXPECT_LE(box.buffered_bytes(), bound);
  std::vector<float> got(kAheadPiece);
  for (int m = 0; m < kAheadMessages; ++m) {
    ASSERT_TRUE(receiver
                    ->Recv({1, 0, m}, got.data(), kAheadPiece, RecvOp::kCopy,
                           absl::Now() + absl::Seconds(30))
                    .ok());
    for (int64_t i = 0; i < kAheadPiece; i += 4099) {
      ASSERT_EQ(got[i], static_cast<float>(m + (m * kAheadPiece + i) % 5));
    }
  }
  EXPECT_LE(box.peak_buffered_bytes(), bound);
  EXPECT_TRUE(sender->WaitSent(absl::Now() + absl::Seconds(30)).ok());
}

// A paused stream whose sender goes (a ring generation ends) finishes its
// call, so the receiver's server stops without waiting for it.
TEST(GrpcRingTransportTest, APausedStreamEndsWhenItsSenderGoes) {
  Ring ring(2);
  auto sender = ring.Transport(0);
  std::vector<float> buffer;
  SendAheadUntilPaused(ring, *sender, buffer);
  const absl::Time start = absl::Now();
  sender.reset();  // half-close; cancelled after 1 s of unread messages
  ring.peers[1].reset();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(GrpcRingTransportTest, BroadcastForwardsTheRootsPiecesToEveryRank) {
  const int n = 4;
  const int64_t count = 10007;
  Ring ring(n);
  std::vector<std::unique_ptr<GrpcRingTransport>> transports;
  for (int r = 0; r < n; ++r) transports.push_back(ring.Transport(r));
  std::vector<std::vector<float>> data(n, std::vector<float>(count, -1.0f));
  for (int64_t i = 0; i < count; ++i) data[2][i] = 0.5f * static_cast<float>(i);
  std::vector<absl::Status> results(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      RingCollective collective(transports[r].get(), {1000, absl::Seconds(20)});
      results[r] = collective.Broadcast(/*op_id=*/3, data[r].data(), count,
                                        /*root=*/2);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
    EXPECT_EQ(data[r], data[2]) << "rank " << r;
  }
}

TEST(GrpcRingTransportTest, BytesOnTheWireAreTheRingVolumePlusFraming) {
  const int n = 3;
  const int64_t count = 300000;  // divisible by 3
  Ring ring(n);
  std::vector<std::vector<float>> data;
  auto results =
      AllReduce(ring, n, n, count, data, absl::Seconds(30), 64 * 1024);
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(results[r].ok()) << results[r];
    const double payload = 2.0 * (n - 1) / n * count * sizeof(float);
    const TransferBytes bytes = ring.peers[r]->counter->Get();
    EXPECT_GE(bytes.sent, payload);
    EXPECT_LT(bytes.sent, payload * 1.01) << "rank " << r;
  }
}

TEST(GrpcRingTransportTest, SilentPeerFailsTheCollectiveWithinItsDeadline) {
  Ring ring(3);
  std::vector<std::vector<float>> data;
  const absl::Time start = absl::Now();
  // Rank 2 never takes part: ranks 0 and 1 must give up, not hang.
  auto results = AllReduce(ring, 3, 2, 3000, data, absl::Seconds(1));
  const absl::Duration took = absl::Now() - start;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].code(), absl::StatusCode::kDeadlineExceeded)
        << results[r];
  }
  EXPECT_NE(results[0].message().find("ring rank 2 (w2"), std::string::npos)
      << results[0];
  EXPECT_LT(took, absl::Seconds(4));
}

TEST(GrpcRingTransportTest, DeadNextPeerIsUnavailableNotAHang) {
  Ring ring(2);
  ring.peers[1]->server->Shutdown(std::chrono::system_clock::now());
  auto transport = ring.Transport(0);
  RingCollective collective(transport.get(), {1000, absl::Seconds(10)});
  std::vector<float> data(5000, 1.0f);
  const absl::Time start = absl::Now();
  const absl::Status status =
      collective.AllReduceSum(1, data.data(), data.size());
  EXPECT_TRUE(absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status))
      << status;
  EXPECT_LT(absl::Now() - start, absl::Seconds(11));
}

TEST(GrpcRingTransportTest, OtherJobAndOlderGenerationAreRefused) {
  Ring ring(2);
  {
    auto stranger = ring.Transport(0, /*generation=*/1, "another-job");
    ASSERT_TRUE(
        stranger->Send({1, 0, 0}, std::vector<float>(4).data(), 4).ok());
  }
  // Nothing of the foreign job was filed for rank 1.
  EXPECT_EQ(ring.peers[1]->mailbox->buffered_bytes(), 0);
  ring.peers[1]->mailbox->Enter(5);
  {
    auto old = ring.Transport(0, /*generation=*/4);
    ASSERT_TRUE(old->Send({1, 0, 0}, std::vector<float>(4).data(), 4).ok());
  }
  EXPECT_EQ(ring.peers[1]->mailbox->buffered_bytes(), 0);
}

// Shared-memory links: the same sums as the streams, every message through
// the links (bigger than a link's ring, too), counted as the streams would
// count them.
TEST(GrpcRingTransportTest, SharedMemoryLinksSumAsTheStreamsAndCountAlike) {
  for (int n : {2, 3}) {
    for (int64_t count : {int64_t{7}, int64_t{3 << 20}}) {  // 12 MiB: > ring
      int64_t stream_sent[3] = {};
      for (bool shm : {false, true}) {
        Ring ring(n);
        ring.shared_memory = shm;
        std::vector<std::vector<float>> data;
        std::vector<std::unique_ptr<GrpcRingTransport>> transports;
        auto results = AllReduce(ring, n, n, count, data, absl::Seconds(30),
                                 256 * 1024, &transports);
        const float rank_sum = n * (n + 1) / 2.0f;
        for (int r = 0; r < n; ++r) {
          ASSERT_TRUE(results[r].ok()) << results[r];
          EXPECT_EQ(transports[r]->uses_shared_memory(), shm);
          for (int64_t i = 0; i < count; i += 997) {
            ASSERT_EQ(data[r][i], rank_sum * (i % 7)) << r << " " << i;
          }
          const int64_t sent = ring.peers[r]->counter->Get().sent;
          if (!shm) {
            stream_sent[r] = sent;
          } else {
            // The offer and its answer (about 100 bytes) come on top.
            EXPECT_NEAR(sent, stream_sent[r], 200) << "n=" << n << " r=" << r;
          }
        }
      }
    }
  }
}

// Messages come through a link in the order sent; one asked for out of
// that order is found behind the others, which are kept for their takers.
TEST(GrpcRingTransportTest, SharedMemoryKeepsMessagesAheadOfTheOneAskedFor) {
  Ring ring(2);
  ring.shared_memory = true;
  auto sender = ring.Transport(0);
  auto receiver = ring.Transport(1);
  const std::vector<float> a(1000, 1.5f), b(3000, 2.5f);
  ASSERT_TRUE(sender->Send({1, 0, 1}, b.data(), 3000).ok());
  ASSERT_TRUE(sender->SendBytes({1, 0, 2}, "opaque").ok());
  ASSERT_TRUE(sender->Send({1, 0, 0}, a.data(), 1000).ok());
  EXPECT_TRUE(sender->uses_shared_memory());
  std::vector<float> got(1000, 1.0f);
  ASSERT_TRUE(receiver
                  ->Recv({1, 0, 0}, got.data(), 1000, RecvOp::kAdd,
                         absl::Now() + absl::Seconds(20))
                  .ok());
  EXPECT_EQ(got, std::vector<float>(1000, 2.5f));
  auto bytes = receiver->RecvBytes({1, 0, 2}, absl::Now() + absl::Seconds(20));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, "opaque");
  std::vector<float> got_b(3000);
  ASSERT_TRUE(receiver
                  ->Recv({1, 0, 1}, got_b.data(), 3000, RecvOp::kCopy,
                         absl::Now() + absl::Seconds(20))
                  .ok());
  EXPECT_EQ(got_b, b);
  // A wrong size is DATA_LOSS, and the link goes on with the next message.
  ASSERT_TRUE(sender->Send({2, 0, 0}, a.data(), 1000).ok());
  ASSERT_TRUE(sender->Send({2, 0, 1}, a.data(), 10).ok());
  EXPECT_EQ(receiver
                ->Recv({2, 0, 0}, got.data(), 999, RecvOp::kCopy,
                       absl::Now() + absl::Seconds(20))
                .code(),
            absl::StatusCode::kDataLoss);
  EXPECT_TRUE(receiver
                  ->Recv({2, 0, 1}, got.data(), 10, RecvOp::kCopy,
                         absl::Now() + absl::Seconds(20))
                  .ok());
}

// A pipeline's middle stage receives from both neighbours in one
// generation (activations on the forward ring, gradients on the reversed
// one): a link from each, both kept, each read for its own ring.
TEST(GrpcRingTransportTest, SharedMemoryLinksFromTwoSendersShareAMailbox) {
  Ring ring(3);
  ring.shared_memory = true;
  const std::vector<int> forward = {0, 1, 2}, backward = {2, 1, 0};
  auto from_first = ring.Transport(0, 1, kJob, forward);
  auto middle_forward = ring.Transport(1, 1, kJob, forward);
  auto from_last = ring.Transport(0, 1, kJob, backward);
  auto middle_backward = ring.Transport(1, 1, kJob, backward);
  const std::vector<float> activations(5000, 1.0f), gradients(7000, 2.0f);
  ASSERT_TRUE(from_first->Send({1, 0, 0}, activations.data(), 5000).ok());
  ASSERT_TRUE(from_last->Send({2, 0, 0}, gradients.data(), 7000).ok());
  EXPECT_TRUE(from_first->uses_shared_memory());
  EXPECT_TRUE(from_last->uses_shared_memory());
  std::vector<float> got_g(7000), got_a(5000);
  ASSERT_TRUE(middle_backward
                  ->Recv({2, 0, 0}, got_g.data(), 7000, RecvOp::kCopy,
                         absl::Now() + absl::Seconds(20))
                  .ok());
  ASSERT_TRUE(middle_forward
                  ->Recv({1, 0, 0}, got_a.data(), 5000, RecvOp::kCopy,
                         absl::Now() + absl::Seconds(20))
                  .ok());
  EXPECT_EQ(got_g, gradients);
  EXPECT_EQ(got_a, activations);
}

// One link per sender and ring: a second transport of the same sender and
// ring keeps its stream, and a taker waiting on the link gets a message
// the stream brings; once the link's transport is gone, the next one gets
// a link again.
TEST(GrpcRingTransportTest, SharedMemoryASecondSenderKeepsItsStream) {
  Ring ring(2);
  ring.shared_memory = true;
  auto first = ring.Transport(0);
  auto second = ring.Transport(0);
  auto receiver = ring.Transport(1);
  const std::vector<float> x(100, 4.0f), y(200, 5.0f);
  ASSERT_TRUE(first->Send({1, 0, 0}, x.data(), 100).ok());
  ASSERT_TRUE(first->uses_shared_memory());
  std::vector<float> got_y(200);
  absl::Status waited;
  std::thread waiter([&] {
    // Holds the link (nothing on it) while y comes by the stream.
    waited = receiver->Recv({2, 0, 0}, got_y.data(), 200, RecvOp::kCopy,
                            absl::Now() + absl::Seconds(30));
  });
  ASSERT_TRUE(second->Send({2, 0, 0}, y.data(), 200).ok());
  EXPECT_FALSE(second->uses_shared_memory());
  waiter.join();
  ASSERT_TRUE(waited.ok()) << waited;
  EXPECT_EQ(got_y, y);
  std::vector<float> got_x(100);
  ASSERT_TRUE(receiver
                  ->Recv({1, 0, 0}, got_x.data(), 100, RecvOp::kCopy,
                         absl::Now() + absl::Seconds(20))
                  .ok());
  EXPECT_EQ(got_x, x);
  first.reset();
  auto third = ring.Transport(0);
  ASSERT_TRUE(third->Send({3, 0, 0}, x.data(), 100).ok());
  EXPECT_TRUE(third->uses_shared_memory());
  ASSERT_TRUE(receiver
                  ->Recv({3, 0, 0}, got_x.data(), 100, RecvOp::kCopy,
                         absl::Now() + absl::Seconds(20))
                  .ok());
}

// Each end of a link sees the other go: a receiver waiting on the link and
// a sender blocked on a full link both fail at once, not at their
// deadlines.
TEST(GrpcRingTransportTest, SharedMemoryEndsFailWhenTheOtherGoes) {
  {
    Ring ring(2);
    ring.shared_memory = true;
    auto sender = ring.Transport(0);
    auto receiver = ring.Transport(1);
    const std::vector<float> one(1, 1.0f);
    ASSERT_TRUE(sender->Send({1, 0, 0}, one.data(), 1).ok());  // links them
    std::vector<float> got(1);
    ASSERT_TRUE(receiver
                    ->Recv({1, 0, 0}, got.data(), 1, RecvOp::kCopy,
                           absl::Now() + absl::Seconds(20))
                    .ok());
    // The stream beside the link is up: all the sender sent (the offer,
    // the hello, the message) is counted received...
    ASSERT_TRUE(testutil::WaitUntil("the hello", [&] {
                  return ring.peers[1]->counter->Get().received ==
                         ring.peers[0]->counter->Get().sent;
                }).ok());
    const absl::Time start = absl::Now();
    absl::Status waited;
    std::thread waiter([&] {
      waited = receiver->Recv({1, 0, 1}, got.data(), 1, RecvOp::kCopy,
                              absl::Now() + absl::Seconds(60));
    });
    // ...and breaks, as when the sender's process dies.
    sender->Abort();
    waiter.join();
    EXPECT_FALSE(waited.ok());
    EXPECT_LT(absl::Now() - start, absl::Seconds(20)) << waited;
  }
  {
    Ring ring(2);
    ring.shared_memory = true;
    auto sender = ring.Transport(0);
    std::vector<float> big(4 << 20, 1.0f);  // 16 MiB: 4 times the ring
    ASSERT_TRUE(sender->SendBorrowed({1, 0, 0}, big.data(), big.size()).ok());
    ASSERT_TRUE(sender->uses_shared_memory());
    const absl::Time start = absl::Now();
    ring.peers[1].reset();  // nobody reads; its server goes
    EXPECT_TRUE(sender->WaitSent(absl::Now() + absl::Seconds(60)).ok());
    EXPECT_LT(absl::Now() - start, absl::Seconds(20));
    EXPECT_EQ(sender->Send({1, 0, 1}, big.data(), 1).code(),
              absl::StatusCode::kUnavailable);
  }
}

// No link where a link is emulated (the emulation shapes the stream), or
// where none can be made: the stream carries the messages.
TEST(GrpcRingTransportTest, SharedMemoryFallsBackToTheStream) {
  LinkLimit limit;
  limit.bytes_per_second = 1e9;
  LinkShaper shaper(limit);
  for (int variant = 0; variant < 2; ++variant) {
    Ring ring(2);
    ring.shared_memory = true;
    if (variant == 0) ring.shaper = &shaper;
    if (variant == 1) ring.shared_memory_bytes = 1000;  // no such link
    auto sender = ring.Transport(0);
    auto receiver = ring.Transport(1);
    const std::vector<float> x(100, 3.0f);
    ASSERT_TRUE(sender->Send({1, 0, 0}, x.data(), 100).ok());
    EXPECT_FALSE(sender->uses_shared_memory());
    std::vector<float> got(100);
    ASSERT_TRUE(receiver
                    ->Recv({1, 0, 0}, got.data(), 100, RecvOp::kCopy,
                           absl::Now() + absl::Seconds(20))
                    .ok());
    EXPECT_EQ(got, x);
  }
}

// A generation's link goes to one taker at a time; a message filed comes
// before it; failing or leaving the generation interrupts the link.
TEST(RingMailboxTest, ALinkIsHeldByOneTakerAtATime) {
  auto writer = ShmLinkWriter::Create(64 << 10);
  ASSERT_TRUE(writer.ok()) << writer.status();
  auto reader =
      ShmLinkReader::Open((*writer)->name(), 64 << 10, (*writer)->nonce());
  ASSERT_TRUE(reader.ok()) << reader.status();
  (*writer)->Unlink();
  std::shared_ptr<ShmLinkReader> link = *std::move(reader);
  RingMailbox box;
  ASSERT_TRUE(box.AttachLink(2, "w0", link).ok());
  EXPECT_EQ(box.AttachLink(1, "w0", link).code(), absl::StatusCode::kAborted);
  // Another sender's link is not this one's.
  EXPECT_EQ(
      box.TakeOrLink(2, {1, 0, 0}, "w5", absl::Now() + absl::Milliseconds(20))
          .status()
          .code(),
      absl::StatusCode::kDeadlineExceeded);
  auto first =
      box.TakeOrLink(2, {1, 0, 0}, "w0", absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->link, link);
  // Held: a second taker waits, and gets a message filed meanwhile.
  EXPECT_EQ(
      box.TakeOrLink(2, {1, 0, 1}, "w0", absl::Now() + absl::Milliseconds(20))
          .status()
          .code(),
      absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(box.Deliver(2, {1, 0, 1}, RingPayload("abcd")).ok());
  auto second =
      box.TakeOrLink(2, {1, 0, 1}, "w0", absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(second->payload.has_value());
  box.ReleaseLink("w0");
  EXPECT_TRUE(box.TakeOrLink(2, {1, 0, 2}, "w0", absl::Now()).ok());
  box.ReleaseLink("w0");
  box.Fail(2, absl::UnavailableError("the sender went"));
  EXPECT_EQ(link->Peek(absl::Now() + absl::Seconds(5)).status().code(),
            absl::StatusCode::kUnavailable);
  // A newer generation drops the link: takers wait for the stream again.
  EXPECT_TRUE(box.Enter(3));
  EXPECT_EQ(
      box.TakeOrLink(3, {1, 0, 0}, "w0", absl::Now() + absl::Milliseconds(20))
          .status()
          .code(),
      absl::StatusCode::kDeadlineExceeded);
}

TEST(RingMailboxTest, DeliverTakeAndErrors) {
  RingMailbox box(/*max_buffered_bytes=*/16);
  EXPECT_TRUE(box.Deliver(2, {1, 0, 0}, RingPayload(std::string(8, 'a'))).ok());
  EXPECT_EQ(box.Deliver(2, {1, 0, 0}, RingPayload("x")).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(box.Deliver(2, {1, 0, 1}, RingPayload(std::string(12, 'b'))).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(box.Deliver(1, {1, 0, 2}, RingPayload("x")).code(),
            absl::StatusCode::kAborted);
  auto got = box.Take(2, {1, 0, 0}, absl::Now() + absl::Seconds(1));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(std::move(*got).TakeString(), std::string(8, 'a'));
  EXPECT_EQ(box.Take(2, {1, 0, 3}, absl::Now() + absl::Milliseconds(20))
                .status()
                .code(),
            absl::StatusCode::kDeadlineExceeded);
  box.Fail(2, absl::UnavailableError("link broke"));
  EXPECT_EQ(
      box.Take(2, {1, 0, 3}, absl::Now() + absl::Seconds(5)).status().code(),
      absl::StatusCode::kUnavailable);
  EXPECT_TRUE(box.Enter(3));  // a new ring clears the failure
  EXPECT_EQ(
      box.Take(2, {1, 0, 3}, absl::Now() + absl::Seconds(5)).status().code(),
      absl::StatusCode::kCancelled);
  box.Close();
  EXPECT_EQ(
      box.Take(3, {1, 0, 3}, absl::Now() + absl::Seconds(5)).status().code(),
      absl::StatusCode::kCancelled);
}

TEST(WeightsPublisherTest, ReadersGetFreshEnoughSnapshotsOnly) {
  WeightsPublisher publisher;
  EXPECT_FALSE(publisher.wanted());
  EXPECT_TRUE(absl::IsUnavailable(publisher.Get(0).status()));
  EXPECT_TRUE(publisher.wanted());
  publisher.Publish(5, {1.0f, 2.0f});
  EXPECT_FALSE(publisher.wanted());
  auto snapshot = publisher.Get(5);
  ASSERT_TRUE(snapshot.ok());
  EXPECT_EQ((*snapshot)->steps_applied, 5);
  EXPECT_EQ((*snapshot)->values, std::vector<float>({1.0f, 2.0f}));
  EXPECT_EQ(publisher.wanted_step(), 5);
  EXPECT_TRUE(absl::IsUnavailable(publisher.Get(6).status()));
  EXPECT_TRUE(publisher.wanted());
  EXPECT_EQ(publisher.wanted_step(), 6);
  EXPECT_TRUE(publisher.Get(3).ok());  // an older step: served, and kept
  EXPECT_EQ(publisher.wanted_step(), 6);
}

TEST(WeightsPublisherTest, ASnapshotOfRangesHoldsOnlyTheirValues) {
  WeightsPublisher publisher;
  const std::vector<float> flat = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<FlatRange> ranges = {{1, 3}, {6, 7}};
  EXPECT_EQ(PackRanges(flat.data(), ranges), std::vector<float>({1, 2, 6}));
  publisher.Publish(4, PackRanges(flat.data(), ranges), {}, ranges, 10);
  auto snapshot = publisher.Get(4);
  ASSERT_TRUE(snapshot.ok());
  EXPECT_EQ((*snapshot)->values, std::vector<float>({1, 2, 6}));
  EXPECT_EQ((*snapshot)->total_elements, 10);
  // Values that are not the ranges' size, or a range past the buffer, are
  // refused: the snapshot before stays.
  publisher.Publish(5, {1, 2}, {}, ranges, 10);
  publisher.Publish(5, {1, 2, 6}, {}, {{1, 3}, {10, 11}}, 10);
  EXPECT_EQ((*publisher.Get(0))->steps_applied, 4);
}

}  // namespace
}  // namespace ferry

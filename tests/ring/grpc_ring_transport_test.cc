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
#include "tests/ring/loopback_ring.h"
#include "tests/testing/wait_until.h"

namespace ferry {
namespace {

using testutil::AllReduce;
using testutil::kJob;
using testutil::Ring;

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

// Shared-memory links between ring neighbours (ring/shm_link.h) through
// the real transport: loopback RingPeer servers in one process, whose
// transports offer each other links as workers on one host do.
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "ring/grpc_ring_transport.h"
#include "ring/ring_mailbox.h"
#include "ring/shm_link.h"
#include "tests/ring/loopback_ring.h"
#include "tests/testing/wait_until.h"

namespace ferry {
namespace {

using testutil::AllReduce;
using testutil::kJob;
using testutil::RecvCopy;
using testutil::Ring;

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
  ASSERT_TRUE(RecvCopy(*receiver, {1, 0, 1}, got_b.data(), 3000).ok());
  EXPECT_EQ(got_b, b);
  // A wrong size is DATA_LOSS, and the link goes on with the next message.
  ASSERT_TRUE(sender->Send({2, 0, 0}, a.data(), 1000).ok());
  ASSERT_TRUE(sender->Send({2, 0, 1}, a.data(), 10).ok());
  EXPECT_EQ(RecvCopy(*receiver, {2, 0, 0}, got.data(), 999).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_TRUE(RecvCopy(*receiver, {2, 0, 1}, got.data(), 10).ok());
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
  ASSERT_TRUE(RecvCopy(*middle_backward, {2, 0, 0}, got_g.data(), 7000).ok());
  ASSERT_TRUE(RecvCopy(*middle_forward, {1, 0, 0}, got_a.data(), 5000).ok());
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
  ASSERT_TRUE(RecvCopy(*receiver, {1, 0, 0}, got_x.data(), 100).ok());
  EXPECT_EQ(got_x, x);
  first.reset();
  auto third = ring.Transport(0);
  ASSERT_TRUE(third->Send({3, 0, 0}, x.data(), 100).ok());
  EXPECT_TRUE(third->uses_shared_memory());
  ASSERT_TRUE(RecvCopy(*receiver, {3, 0, 0}, got_x.data(), 100).ok());
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
    ASSERT_TRUE(RecvCopy(*receiver, {1, 0, 0}, got.data(), 1).ok());
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
    ASSERT_TRUE(RecvCopy(*receiver, {1, 0, 0}, got.data(), 100).ok());
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

}  // namespace
}  // namespace ferry

// RingPeerService's Exchange over loopback with raw messages (a
// grpc::GenericStub), as a peer that does not use GrpcRingTransport could
// send them: the summary of a good stream, and a message that does not
// parse, which must fail the call and the waiting collective at once
// rather than end the stream OK.
#include "ring/ring_peer_service.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ferry/v1/ring.pb.h"
#include "gtest/gtest.h"
#include "proto/rpc_util.h"
#include "tests/testing/raw_stream_call.h"

namespace ferry {
namespace {

constexpr char kJob[] = "ring-test";
constexpr char kExchange[] = "/ferry.v1.RingPeer/Exchange";

using testutil::RawCallResult;

// Exchange with raw messages on the peer at `port`.
RawCallResult RawExchange(int port, const std::vector<std::string>& messages) {
  return testutil::RawStreamCall(port, kExchange, messages);
}

std::unique_ptr<RingPeerServer> StartPeer() {
  auto peer = StartRingPeerServer("127.0.0.1:0");
  EXPECT_TRUE(peer.ok()) << peer.status();
  (*peer)->service->set_job_id(kJob);
  return std::move(*peer);
}

v1::RingMessage Hello(int64_t generation) {
  v1::RingMessage m;
  v1::RingHello* hello = m.mutable_hello();
  hello->set_job_id(kJob);
  hello->set_generation(generation);
  hello->set_from_rank(0);
  hello->set_ring_size(2);
  hello->set_from_worker_id("w0");
  return m;
}

std::string Data(int piece, int floats) {
  v1::RingMessage m;
  m.set_op_id(1);
  m.set_piece(piece);
  m.set_data(std::string(floats * sizeof(float), '\1'));
  return m.SerializeAsString();
}

// The bytes of the hello field as RingPeerService counts them on arrival.
int64_t HelloFieldBytes(const v1::RingMessage& m) {
  v1::RingMessage only_hello;
  *only_hello.mutable_hello() = m.hello();
  return static_cast<int64_t>(only_hello.ByteSizeLong());
}

// Field 5 (data) claims 16 bytes and carries 3: no RingMessage.
const std::string kTruncated(
    "\x2a\x10"
    "abc",
    5);

TEST(RingPeerServiceTest, GoodStreamEndsOkWithASummaryOfEveryMessage) {
  auto peer = StartPeer();
  v1::RingMessage first = Hello(1);
  first.set_op_id(1);
  first.set_piece(0);
  first.set_data(std::string(8, '\0'));
  const RawCallResult result = RawExchange(
      peer->port, {first.SerializeAsString(), Data(1, 2), Data(2, 0)});
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  ASSERT_EQ(result.responses.size(), 1u);
  v1::ExchangeSummary summary;
  ASSERT_TRUE(summary.ParseFromString(result.responses[0]));
  EXPECT_EQ(summary.messages(), 3);
  auto taken =
      peer->mailbox->Take(1, RingTag{1, 0, 1}, absl::Now() + absl::Seconds(1));
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(taken->size(), 8u);
}

TEST(RingPeerServiceTest,
     UnparsableMessageFailsTheCallAndTheWaitingCollective) {
  auto peer = StartPeer();
  const v1::RingMessage hello = Hello(3);
  // The local collective waits for a piece that comes after the bad
  // message; it must fail as soon as the stream does, not at its deadline.
  absl::Status waited;
  absl::Duration waited_for;
  std::thread collective([&] {
    const absl::Time start = absl::Now();
    waited = peer->mailbox->Take(3, RingTag{1, 0, 9}, start + absl::Seconds(15))
                 .status();
    waited_for = absl::Now() - start;
  });
  const RawCallResult result = RawExchange(
      peer->port,
      {hello.SerializeAsString(), Data(1, 4), kTruncated, Data(9, 4)});
  collective.join();

  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(result.status.error_message(), "ring message 3 does not parse");
  EXPECT_TRUE(result.responses.empty());
  EXPECT_EQ(waited.code(), absl::StatusCode::kInvalidArgument) << waited;
  EXPECT_EQ(waited.message(), "ring message 3 does not parse");
  EXPECT_LT(waited_for, absl::Seconds(10));
  // What came before it was filed; the bad message counts as received.
  auto taken =
      peer->mailbox->Take(3, RingTag{1, 0, 1}, absl::Now() + absl::Seconds(1));
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(taken->size(), 16u);
  EXPECT_EQ(peer->counter->Get().received,
            HelloFieldBytes(hello) + static_cast<int64_t>(kTruncated.size()));
}

TEST(RingPeerServiceTest, UnparsableHelloIsInvalidArgument) {
  auto peer = StartPeer();
  // A hello whose job_id is not UTF-8 (field 1 { field 1: "\xff" }):
  // proto3 refuses to parse it.
  const std::string bad_hello("\x0a\x03\x0a\x01\xff", 5);
  const RawCallResult result = RawExchange(peer->port, {bad_hello, Data(1, 1)});
  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(result.status.error_message(), "ring message 1 does not parse");
  // The next stream of the ring is served as usual.
  const RawCallResult good =
      RawExchange(peer->port, {Hello(1).SerializeAsString()});
  EXPECT_TRUE(good.status.ok()) << good.status.error_message();
}

}  // namespace
}  // namespace ferry

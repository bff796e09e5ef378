#include "ring/in_memory_ring.h"

#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/wait_until.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

absl::Time FarDeadline() { return absl::Now() + absl::Seconds(10); }

TEST(InMemoryRingTest, RanksAndSizes) {
  InMemoryRingHub hub(3);
  EXPECT_EQ(hub.size(), 3);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(hub.transport(r)->rank(), r);
    EXPECT_EQ(hub.transport(r)->size(), 3);
  }
}

TEST(InMemoryRingTest, DeliversToTheNextRankWithCopyAndAdd) {
  InMemoryRingHub hub(3);
  const std::vector<float> a = {1, 2, 3};
  ASSERT_TRUE(hub.transport(2)->Send({1, 0, 0}, a.data(), 3).ok());
  ASSERT_TRUE(hub.transport(2)->Send({1, 0, 1}, a.data(), 3).ok());
  std::vector<float> dst = {10, 20, 30};
  ASSERT_TRUE(hub.transport(0)
                  ->Recv({1, 0, 1}, dst.data(), 3, RecvOp::kAdd, FarDeadline())
                  .ok());
  EXPECT_EQ(dst, (std::vector<float>{11, 22, 33}));
  ASSERT_TRUE(hub.transport(0)
                  ->Recv({1, 0, 0}, dst.data(), 3, RecvOp::kCopy, FarDeadline())
                  .ok());
  EXPECT_EQ(dst, a);
}

TEST(InMemoryRingTest, MatchesByTagWhateverTheArrivalOrder) {
  InMemoryRingHub hub(2);
  for (int piece = 9; piece >= 0; --piece) {
    const float value = static_cast<float>(piece);
    ASSERT_TRUE(hub.transport(0)->Send({4, 2, piece}, &value, 1).ok());
  }
  for (int piece = 0; piece < 10; ++piece) {
    float got = -1;
    ASSERT_TRUE(hub.transport(1)
                    ->Recv({4, 2, piece}, &got, 1, RecvOp::kCopy, FarDeadline())
                    .ok());
    EXPECT_EQ(got, piece);
  }
}

TEST(InMemoryRingTest, SendCopiesTheData) {
  InMemoryRingHub hub(2);
  std::vector<float> src = {5, 6};
  ASSERT_TRUE(hub.transport(1)->Send({0, 0, 0}, src.data(), 2).ok());
  src = {0, 0};
  std::vector<float> dst(2);
  ASSERT_TRUE(hub.transport(0)
                  ->Recv({0, 0, 0}, dst.data(), 2, RecvOp::kCopy, FarDeadline())
                  .ok());
  EXPECT_EQ(dst, (std::vector<float>{5, 6}));
}

TEST(InMemoryRingTest, SingleRankTalksToItself) {
  InMemoryRingHub hub(1);
  const float one = 1;
  ASSERT_TRUE(hub.transport(0)->Send({0, 0, 0}, &one, 1).ok());
  float got = 0;
  ASSERT_TRUE(hub.transport(0)
                  ->Recv({0, 0, 0}, &got, 1, RecvOp::kCopy, FarDeadline())
                  .ok());
  EXPECT_EQ(got, 1);
}

TEST(InMemoryRingTest, EmptyMessages) {
  InMemoryRingHub hub(2);
  ASSERT_TRUE(hub.transport(0)->Send({0, 0, 0}, nullptr, 0).ok());
  EXPECT_TRUE(hub.transport(1)
                  ->Recv({0, 0, 0}, nullptr, 0, RecvOp::kAdd, FarDeadline())
                  .ok());
}

TEST(InMemoryRingTest, CountMismatchIsDataLossAndLeavesDstUnchanged) {
  InMemoryRingHub hub(2);
  const std::vector<float> src = {1, 2, 3};
  ASSERT_TRUE(hub.transport(0)->Send({3, 1, 2}, src.data(), 3).ok());
  std::vector<float> dst = {7, 7, 7, 7};
  const absl::Status s = hub.transport(1)->Recv({3, 1, 2}, dst.data(), 4,
                                                RecvOp::kCopy, FarDeadline());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("op 3 stage 1 piece 2"));
  EXPECT_EQ(dst, (std::vector<float>{7, 7, 7, 7}));
}

TEST(InMemoryRingTest, MissingMessageIsDeadlineExceededNamingPeerAndTag) {
  InMemoryRingHub hub(3);
  float dst = 4;
  const absl::Time start = absl::Now();
  const absl::Status s = hub.transport(0)->Recv(
      {8, 3, 1}, &dst, 1, RecvOp::kAdd, start + absl::Milliseconds(50));
  const absl::Duration waited = absl::Now() - start;
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("rank 2"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("op 8 stage 3 piece 1"));
  EXPECT_GE(waited, absl::Milliseconds(45));
  EXPECT_LT(waited, absl::Seconds(1));
  EXPECT_EQ(dst, 4);
}

TEST(InMemoryRingTest, AbortCancelsABlockedRecvAndLaterCalls) {
  InMemoryRingHub hub(2);
  absl::Status blocked;
  absl::Duration waited;
  std::thread receiver([&] {
    const absl::Time start = absl::Now();
    float dst = 0;
    blocked = hub.transport(1)->Recv({0, 0, 0}, &dst, 1, RecvOp::kCopy,
                                     FarDeadline());
    waited = absl::Now() - start;
  });
  const absl::Status waiting = testutil::WaitUntil(
      "rank 1's Recv to block", [&] { return hub.blocked_receivers(1) > 0; });
  EXPECT_TRUE(waiting.ok()) << waiting;
  EXPECT_EQ(hub.blocked_receivers(0), 0);
  hub.transport(1)->Abort();
  receiver.join();
  EXPECT_EQ(hub.blocked_receivers(1), 0);
  EXPECT_EQ(blocked.code(), absl::StatusCode::kCancelled) << blocked;
  EXPECT_LT(waited, absl::Seconds(2));

  hub.transport(1)->Abort();  // idempotent
  const float x = 1;
  EXPECT_EQ(hub.transport(1)->Send({0, 0, 1}, &x, 1).code(),
            absl::StatusCode::kCancelled);
  // A message that is already there is not delivered after Abort either.
  ASSERT_TRUE(hub.transport(0)->Send({0, 0, 2}, &x, 1).ok());
  float dst = 0;
  EXPECT_EQ(hub.transport(1)
                ->Recv({0, 0, 2}, &dst, 1, RecvOp::kCopy, FarDeadline())
                .code(),
            absl::StatusCode::kCancelled);
  // The other rank is not aborted.
  EXPECT_TRUE(hub.transport(0)->Send({0, 0, 3}, &x, 1).ok());
}

TEST(InMemoryRingTest, SilencedRankIsNeverHeardFrom) {
  InMemoryRingHub hub(2);
  hub.Silence(0);
  const float x = 1;
  EXPECT_TRUE(hub.transport(0)->Send({0, 0, 0}, &x, 1).ok());
  float dst = 0;
  EXPECT_EQ(hub.transport(1)
                ->Recv({0, 0, 0}, &dst, 1, RecvOp::kCopy,
                       absl::Now() + absl::Milliseconds(20))
                .code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(hub.bytes_sent(0), 0);
  // Rank 1 still talks to rank 0.
  EXPECT_TRUE(hub.transport(1)->Send({0, 0, 0}, &x, 1).ok());
  EXPECT_TRUE(hub.transport(0)
                  ->Recv({0, 0, 0}, &dst, 1, RecvOp::kCopy, FarDeadline())
                  .ok());
}

TEST(InMemoryRingTest, CountsFourBytesPerFloat) {
  InMemoryRingHub hub(3);
  std::vector<float> buf(100);
  ASSERT_TRUE(hub.transport(0)->Send({0, 0, 0}, buf.data(), 100).ok());
  ASSERT_TRUE(hub.transport(0)->Send({0, 0, 1}, buf.data(), 5).ok());
  ASSERT_TRUE(
      hub.transport(1)
          ->Recv({0, 0, 0}, buf.data(), 100, RecvOp::kAdd, FarDeadline())
          .ok());
  EXPECT_EQ(hub.bytes_sent(0), 420);
  EXPECT_EQ(hub.bytes_received(1), 400);
  EXPECT_EQ(hub.bytes_sent(1), 0);
  EXPECT_EQ(hub.bytes_received(0), 0);
  EXPECT_EQ(hub.bytes_received(2), 0);
}

TEST(InMemoryRingTest, ConcurrentSenderAndReceiver) {
  InMemoryRingHub hub(2);
  constexpr int kMessages = 2000;
  std::thread sender([&] {
    for (int i = 0; i < kMessages; ++i) {
      const float v = static_cast<float>(i);
      ASSERT_TRUE(hub.transport(0)->Send({0, 0, i}, &v, 1).ok());
    }
  });
  float sum = 0;
  for (int i = 0; i < kMessages; ++i) {
    ASSERT_TRUE(hub.transport(1)
                    ->Recv({0, 0, i}, &sum, 1, RecvOp::kAdd, FarDeadline())
                    .ok());
  }
  sender.join();
  EXPECT_EQ(sum, kMessages * (kMessages - 1) / 2);
}

}  // namespace
}  // namespace ferry

// RingMailbox: generations, and the bounds on what a left neighbour can make
// a worker buffer (bytes and messages): RESOURCE_EXHAUSTED, nothing filed,
// room again once the collective takes messages; and the read-ahead gate: a
// stream pauses past the bound and reads on when the collective takes
// messages or waits for one not filed.
#include "ring/ring_mailbox.h"

#include <atomic>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

RingTag Tag(int piece) { return RingTag{1, 0, piece}; }

TEST(RingMailboxTest, MessagesBeyondTheCountLimitAreRefusedUntilTaken) {
  RingMailbox box(/*max_buffered_bytes=*/1 << 20, /*max_messages=*/2);
  ASSERT_TRUE(box.Deliver(0, Tag(0), RingPayload("")).ok());
  ASSERT_TRUE(box.Deliver(0, Tag(1), RingPayload("abcd")).ok());
  const absl::Status refused = box.Deliver(0, Tag(2), RingPayload(""));
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("unclaimed ring messages is 3; the limit is 2"));
  auto taken = box.Take(0, Tag(1), absl::Now() + absl::Seconds(1));
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(std::move(*taken).TakeString(), "abcd");
  EXPECT_TRUE(box.Deliver(0, Tag(2), RingPayload("")).ok());
}

TEST(RingMailboxTest, BytesBeyondTheLimitAreRefusedAndNothingIsFiled) {
  RingMailbox box(/*max_buffered_bytes=*/8);
  ASSERT_TRUE(box.Deliver(0, Tag(0), RingPayload("12345678")).ok());
  EXPECT_EQ(box.Deliver(0, Tag(1), RingPayload("9")).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(box.buffered_bytes(), 8);
  EXPECT_EQ(
      box.Take(0, Tag(1), absl::Now() + absl::Milliseconds(20)).status().code(),
      absl::StatusCode::kDeadlineExceeded);
}

TEST(RingMailboxTest, OlderGenerationIsAbortedNewerDropsTheOld) {
  RingMailbox box;
  ASSERT_TRUE(box.Deliver(2, Tag(0), RingPayload("old")).ok());
  ASSERT_TRUE(box.Deliver(3, Tag(0), RingPayload("new")).ok());
  EXPECT_EQ(box.buffered_bytes(), 3);
  EXPECT_EQ(box.Deliver(2, Tag(1), RingPayload("x")).code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(box.Take(2, Tag(0), absl::Now() + absl::Seconds(1)).status().code(),
            absl::StatusCode::kCancelled);
}

// A paused stream: its resume, counted.
struct Paused {
  std::atomic<int> resumed{0};
  std::function<void()> Resume() {
    return [this] { resumed.fetch_add(1); };
  }
};

TEST(RingMailboxTest, AStreamPausesPastTheReadAheadBoundUntilTaken) {
  RingMailbox box(/*max_buffered_bytes=*/1 << 20, kDefaultMaxRingMessages,
                  /*read_ahead_bytes=*/8);
  Paused stream;
  int64_t token = -1;
  ASSERT_TRUE(box.Deliver(0, Tag(0), RingPayload("1234")).ok());
  EXPECT_TRUE(box.MayReadOn(stream.Resume(), &token));  // 4 < 8
  ASSERT_TRUE(box.Deliver(0, Tag(1), RingPayload("5678")).ok());
  EXPECT_FALSE(box.MayReadOn(stream.Resume(), &token));  // 8: pause
  EXPECT_EQ(box.paused_reads(), 1);
  ASSERT_TRUE(box.Take(0, Tag(0), absl::Now() + absl::Seconds(1)).ok());
  EXPECT_EQ(stream.resumed.load(), 1);    // 4 again, on the taker's thread
  EXPECT_FALSE(box.CancelResume(token));  // already called
  ASSERT_TRUE(box.Take(0, Tag(1), absl::Now() + absl::Seconds(1)).ok());
  EXPECT_EQ(stream.resumed.load(), 1);  // once
  EXPECT_EQ(box.peak_buffered_bytes(), 8);
}

// The message a collective waits for may be behind the unread ones: a
// paused stream reads on while a Take waits for a message not filed.
TEST(RingMailboxTest, AWaitForAMissingMessageResumesReading) {
  RingMailbox box(1 << 20, kDefaultMaxRingMessages, /*read_ahead_bytes=*/4);
  ASSERT_TRUE(box.Deliver(0, Tag(0), RingPayload("full")).ok());
  absl::Notification resumed;
  int64_t token = -1;
  ASSERT_FALSE(box.MayReadOn([&resumed] { resumed.Notify(); }, &token));
  std::thread collective([&box] {
    auto taken = box.Take(0, Tag(7), absl::Now() + absl::Seconds(30));
    EXPECT_TRUE(taken.ok()) << taken.status();
  });
  ASSERT_TRUE(resumed.WaitForNotificationWithTimeout(absl::Seconds(30)));
  // While it waits, the stream is not paused again, however full the box.
  Paused later;
  ASSERT_TRUE(box.Deliver(0, Tag(1), RingPayload("more")).ok());
  EXPECT_TRUE(box.MayReadOn(later.Resume(), &token));
  ASSERT_TRUE(box.Deliver(0, Tag(7), RingPayload("7")).ok());
  collective.join();
  EXPECT_FALSE(box.MayReadOn(later.Resume(), &token));  // 8 >= 4, no waiter
}

TEST(RingMailboxTest, ACancelledPauseIsNotResumed) {
  RingMailbox box(1 << 20, kDefaultMaxRingMessages, /*read_ahead_bytes=*/1);
  ASSERT_TRUE(box.Deliver(0, Tag(0), RingPayload("x")).ok());
  Paused stream;
  int64_t token = -1;
  ASSERT_FALSE(box.MayReadOn(stream.Resume(), &token));
  EXPECT_TRUE(box.CancelResume(token));
  EXPECT_FALSE(box.CancelResume(token));
  ASSERT_TRUE(box.Take(0, Tag(0), absl::Now() + absl::Seconds(1)).ok());
  EXPECT_EQ(stream.resumed.load(), 0);
}

// A newer generation (the box emptied), a failed stream and Close each let
// paused streams read on (and end).
TEST(RingMailboxTest, ANewGenerationAFailureOrCloseResumeEveryStream) {
  for (int how = 0; how < 3; ++how) {
    RingMailbox box(1 << 20, kDefaultMaxRingMessages, /*read_ahead_bytes=*/1);
    ASSERT_TRUE(box.Deliver(0, Tag(0), RingPayload("x")).ok());
    Paused a, b;
    int64_t token = -1;
    ASSERT_FALSE(box.MayReadOn(a.Resume(), &token));
    ASSERT_FALSE(box.MayReadOn(b.Resume(), &token));
    if (how == 0) box.Enter(1);
    if (how == 1) box.Fail(0, absl::UnavailableError("stream broke"));
    if (how == 2) box.Close();
    EXPECT_EQ(a.resumed.load(), 1) << how;
    EXPECT_EQ(b.resumed.load(), 1) << how;
  }
}

}  // namespace
}  // namespace ferry

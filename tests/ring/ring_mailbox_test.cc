// RingMailbox: generations, and the bounds on what a left neighbour can make
// a worker buffer (bytes and messages): RESOURCE_EXHAUSTED, nothing filed,
// room again once the collective takes messages.
#include "ring/ring_mailbox.h"

#include <string>

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

}  // namespace
}  // namespace ferry

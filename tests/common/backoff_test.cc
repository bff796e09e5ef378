#include "common/backoff.h"

#include "common/clock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

RetryPolicy Policy(absl::Duration initial, absl::Duration max,
                   absl::Duration budget, double jitter) {
  return RetryPolicy{.initial_backoff = initial,
                     .max_backoff = max,
                     .budget = budget,
                     .jitter = jitter};
}

TEST(BackoffCeiling, DoublesUpToTheCap) {
  const RetryPolicy p =
      Policy(absl::Milliseconds(100), absl::Seconds(1), absl::Seconds(30), 0);
  EXPECT_EQ(BackoffCeiling(p, 0), absl::Milliseconds(100));
  EXPECT_EQ(BackoffCeiling(p, 1), absl::Milliseconds(200));
  EXPECT_EQ(BackoffCeiling(p, 3), absl::Milliseconds(800));
  EXPECT_EQ(BackoffCeiling(p, 4), absl::Seconds(1));
  EXPECT_EQ(BackoffCeiling(p, 1000), absl::Seconds(1));  // no overflow
}

TEST(BackoffCeiling, CapBelowInitialKeepsInitial) {
  const RetryPolicy p = Policy(absl::Milliseconds(300), absl::Milliseconds(50),
                               absl::Seconds(1), 0);
  EXPECT_EQ(BackoffCeiling(p, 0), absl::Milliseconds(300));
  EXPECT_EQ(BackoffCeiling(p, 5), absl::Milliseconds(300));
}

TEST(JitteredBackoff, SpansTheJitterRange) {
  const RetryPolicy p =
      Policy(absl::Milliseconds(100), absl::Seconds(1), absl::Seconds(30), 0.5);
  EXPECT_EQ(JitteredBackoff(p, 0, 0.0), absl::Milliseconds(50));
  EXPECT_EQ(JitteredBackoff(p, 0, 1.0), absl::Milliseconds(100));
  EXPECT_EQ(JitteredBackoff(p, 2, 0.5), absl::Milliseconds(300));
  // No jitter: always the ceiling; out-of-range inputs are clamped.
  const RetryPolicy fixed =
      Policy(absl::Milliseconds(100), absl::Seconds(1), absl::Seconds(30), 0.0);
  EXPECT_EQ(JitteredBackoff(fixed, 1, 0.0), absl::Milliseconds(200));
  EXPECT_EQ(JitteredBackoff(p, 0, 7.0), absl::Milliseconds(100));
  EXPECT_EQ(JitteredBackoff(p, 0, -1.0), absl::Milliseconds(50));
}

TEST(Backoff, WaitsWithinTheBudgetThenGivesUp) {
  FakeClock clock;
  const absl::Time start = clock.Now();
  const RetryPolicy p =
      Policy(absl::Milliseconds(100), absl::Seconds(1), absl::Seconds(5), 0.5);
  Backoff backoff(p, &clock);
  int waits = 0;
  while (backoff.Wait()) ++waits;
  EXPECT_EQ(waits, backoff.retries());
  EXPECT_EQ(waits, clock.sleeps());
  // Every wait ended inside the budget, and the next one would not have.
  EXPECT_LE(clock.Now(), start + p.budget);
  EXPECT_GT(clock.Now() + BackoffCeiling(p, waits), start + p.budget);
  // Waits are at most the ceilings: 0.1 + 0.2 + 0.4 + 0.8 + 1 + ...
  EXPECT_GE(waits, 5);
  EXPECT_FALSE(backoff.Wait());  // still out of budget
}

TEST(Backoff, EachWaitIsWithinItsJitterRange) {
  FakeClock clock;
  const RetryPolicy p = Policy(absl::Milliseconds(100), absl::Milliseconds(400),
                               absl::Hours(1), 0.5);
  Backoff backoff(p, &clock);
  for (int retry = 0; retry < 50; ++retry) {
    const absl::Duration before = clock.slept();
    ASSERT_TRUE(backoff.Wait());
    const absl::Duration waited = clock.slept() - before;
    EXPECT_GE(waited, BackoffCeiling(p, retry) / 2) << retry;
    EXPECT_LE(waited, BackoffCeiling(p, retry)) << retry;
  }
}

TEST(Backoff, JitterSpreadsPeersApart) {
  FakeClock a_clock, b_clock;
  const RetryPolicy p =
      Policy(absl::Seconds(1), absl::Seconds(1), absl::Hours(1), 0.5);
  Backoff a(p, &a_clock), b(p, &b_clock);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(a.Wait());
    ASSERT_TRUE(b.Wait());
  }
  EXPECT_NE(a_clock.Now(), b_clock.Now());
}

TEST(Backoff, ZeroBudgetNeverRetries) {
  FakeClock clock;
  Backoff backoff(Policy(absl::ZeroDuration(), absl::ZeroDuration(),
                         absl::ZeroDuration(), 0),
                  &clock);
  EXPECT_FALSE(backoff.Wait());
  EXPECT_EQ(clock.sleeps(), 0);
}

TEST(Backoff, InfiniteBudgetNeverGivesUpAndResetStartsOver) {
  FakeClock clock;
  Backoff backoff(Policy(absl::Milliseconds(100), absl::Seconds(1),
                         absl::InfiniteDuration(), 0),
                  &clock);
  EXPECT_EQ(backoff.give_up(), absl::InfiniteFuture());
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(backoff.Wait());
  EXPECT_EQ(backoff.retries(), 100);
  backoff.Reset();
  EXPECT_EQ(backoff.retries(), 0);
  const absl::Duration before = clock.slept();
  ASSERT_TRUE(backoff.Wait());
  EXPECT_EQ(clock.slept() - before, absl::Milliseconds(100));
}

TEST(Backoff, ResetRestartsTheBudget) {
  FakeClock clock;
  Backoff backoff(Policy(absl::Milliseconds(100), absl::Milliseconds(100),
                         absl::Milliseconds(250), 0),
                  &clock);
  EXPECT_TRUE(backoff.Wait());
  EXPECT_TRUE(backoff.Wait());
  EXPECT_FALSE(backoff.Wait());
  backoff.Reset();
  EXPECT_TRUE(backoff.Wait());
}

TEST(RealClock, MovesForward) {
  Clock* clock = RealClock();
  const absl::Time a = clock->Now();
  clock->SleepFor(absl::Milliseconds(2));
  EXPECT_GE(clock->Now() - a, absl::Milliseconds(2));
}

}  // namespace
}  // namespace ferry

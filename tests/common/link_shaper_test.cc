#include "common/link_shaper.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

const absl::Time kT0 = absl::FromUnixSeconds(1000);

// Exact up to the nanosecond rounding of absl::Seconds(double).
void ExpectNear(absl::Time actual, absl::Time expected) {
  EXPECT_LE(absl::AbsDuration(actual - expected), absl::Microseconds(1))
      << "actual " << absl::FormatDuration(actual - kT0)
      << " after t0, expected " << absl::FormatDuration(expected - kT0);
}

TEST(ParseBandwidthTest, BitsAndBytesUnits) {
  struct Case {
    const char* text;
    double bytes_per_second;
  } cases[] = {
      {"1Gbit", 125e6},
      {"10Gbit", 1.25e9},
      {"25Gbit", 3.125e9},
      {"100Mbit", 12.5e6},
      {"800Mbps", 100e6},
      {"1.5GB/s", 1.5e9},
      {"100MiB/s", 100.0 * 1048576},
      {"8bit", 1},
      {"2 kbit/s", 250},
      {"1gbps", 125e6},
      {" 10GBit ", 1.25e9},
      {"3B/s", 3},
      {"0", 0},
      {"", 0},
      {"0Gbit", 0},
      {"1e9bit", 125e6},
  };
  for (const Case& c : cases) {
    absl::StatusOr<double> rate = ParseBandwidth(c.text);
    ASSERT_TRUE(rate.ok()) << c.text << ": " << rate.status();
    EXPECT_DOUBLE_EQ(*rate, c.bytes_per_second) << c.text;
  }
}

TEST(ParseBandwidthTest, RejectsAmbiguousOrBadText) {
  for (const char* text : {"100", "10Mb/s", "fast", "-1Gbit", "1Xbit", "Gbit",
                           "1.5GB", "nanGbit", "1Gbit/h"}) {
    absl::StatusOr<double> rate = ParseBandwidth(text);
    ASSERT_FALSE(rate.ok()) << text;
    EXPECT_EQ(rate.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(rate.status().message(), HasSubstr(text));
    EXPECT_THAT(rate.status().message(), HasSubstr("10Gbit"));  // the fix
  }
}

TEST(ParseLatencyTest, Durations) {
  EXPECT_EQ(*ParseLatency("50us"), absl::Microseconds(50));
  EXPECT_EQ(*ParseLatency("1ms"), absl::Milliseconds(1));
  EXPECT_EQ(*ParseLatency("0"), absl::ZeroDuration());
  EXPECT_EQ(*ParseLatency(""), absl::ZeroDuration());
  for (const char* text : {"-1ms", "inf", "soon", "5"}) {
    EXPECT_EQ(ParseLatency(text).status().code(),
              absl::StatusCode::kInvalidArgument)
        << text;
  }
}

TEST(ParseLinkLimitTest, NamesTheFlag) {
  absl::StatusOr<LinkLimit> limit = ParseLinkLimit("10Gbit", "50us");
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_DOUBLE_EQ(limit->bytes_per_second, 1.25e9);
  EXPECT_EQ(limit->latency, absl::Microseconds(50));
  EXPECT_TRUE(limit->enabled());
  EXPECT_THAT(limit->ToString(), HasSubstr("10 Gbit/s"));
  EXPECT_THAT(ParseLinkLimit("10", "").status().message(),
              HasSubstr("--link-bandwidth"));
  EXPECT_THAT(ParseLinkLimit("", "x").status().message(),
              HasSubstr("--link-latency"));
  absl::StatusOr<LinkLimit> none = ParseLinkLimit("", "");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->enabled());
  EXPECT_EQ(none->ToString(), "unlimited");
}

TEST(LinkShaperTest, SerializesAtTheRate) {
  LinkShaper shaper(LinkLimit{1e6, absl::ZeroDuration()}, /*burst_bytes=*/0);
  ExpectNear(shaper.ReserveSend(1000, kT0), kT0 + absl::Milliseconds(1));
  ExpectNear(shaper.ReserveSend(2000, kT0), kT0 + absl::Milliseconds(3));
  // Later than the link is busy: starts at `now`.
  ExpectNear(shaper.ReserveSend(1000, kT0 + absl::Seconds(1)),
             kT0 + absl::Seconds(1) + absl::Milliseconds(1));
  const LinkShaperStats stats = shaper.stats();
  EXPECT_EQ(stats.bytes_sent, 4000);
  EXPECT_EQ(stats.bytes_received, 0);
  EXPECT_LE(absl::AbsDuration(stats.send_delay - absl::Milliseconds(5)),
            absl::Microseconds(1));
}

TEST(LinkShaperTest, SendAndReceiveAreIndependentAndReceiveHasNoLatency) {
  LinkShaper shaper(LinkLimit{1e6, absl::Milliseconds(10)}, 0);
  ExpectNear(shaper.ReserveSend(1000, kT0),
             kT0 + absl::Milliseconds(1) + absl::Milliseconds(10));
  // Full duplex: the receive direction is idle, at the full rate. A
  // message that arrives whole at t0 was on the link since t0 - 1 ms (cut
  // through): it passes at once; a second one arriving at the same time
  // (another sender: incast) waits for the link.
  ExpectNear(shaper.ReserveReceive(1000, kT0), kT0);
  ExpectNear(shaper.ReserveReceive(1000, kT0), kT0 + absl::Milliseconds(1));
  // Messages paced at the rate by their sender pass without delay.
  ExpectNear(shaper.ReserveReceive(1000, kT0 + absl::Milliseconds(2)),
             kT0 + absl::Milliseconds(2));
  EXPECT_EQ(shaper.stats().bytes_received, 3000);
}

TEST(LinkShaperTest, LatencyIsPipelined) {
  LinkShaper shaper(LinkLimit{1e6, absl::Milliseconds(10)}, 0);
  // Two messages queued together: the second follows the first on the
  // link 1 ms later, not 10 ms later.
  ExpectNear(shaper.ReserveSend(1000, kT0), kT0 + absl::Milliseconds(11));
  ExpectNear(shaper.ReserveSend(1000, kT0), kT0 + absl::Milliseconds(12));
  // A one-write-at-a-time stream reserves its next message when the last
  // one was let go (t0 + 12 ms), passing when it was queued (t0): its
  // serialization still follows at once.
  const absl::Time now = kT0 + absl::Milliseconds(12);
  ExpectNear(shaper.ReserveSend(1000, now, kT0), kT0 + absl::Milliseconds(13));
  // `ready` is clamped to now - latency: an old queue time earns no credit.
  const absl::Time later = kT0 + absl::Seconds(5);
  ExpectNear(shaper.ReserveSend(1000, later, kT0),
             later + absl::Milliseconds(1));
}

TEST(LinkShaperTest, ToleranceAbsorbsLateWakeUpsButGivesIdleLinksNoHeadStart) {
  LinkShaper shaper(LinkLimit{1e6, absl::ZeroDuration()});
  EXPECT_EQ(shaper.burst_bytes(), LinkShaper::kMinBurstBytes);
  const absl::Duration tolerance =
      absl::Seconds(static_cast<double>(LinkShaper::kMinBurstBytes) / 1e6);
  // An idle link: even a small message takes its serialization time.
  ExpectNear(shaper.ReserveSend(100, kT0), kT0 + absl::Microseconds(100));
  // 100 messages of 1 MB queued at once: exactly the rate.
  absl::Time last;
  for (int i = 0; i < 100; ++i) last = shaper.ReserveSend(1000000, kT0);
  ExpectNear(last, kT0 + absl::Seconds(100) + absl::Microseconds(100));
  // A one-at-a-time stream that reserves its next message late (the timer
  // thread woke up late), the message ready since the link was busy,
  // continues where the link was: no rate lost.
  const absl::Time late = last + tolerance / 2;
  ExpectNear(shaper.ReserveSend(1000000, late, last - absl::Milliseconds(1)),
             last + absl::Seconds(1));
  const absl::Time busy_until = last + absl::Seconds(1);
  // A message that became ready while the link was idle, even for less
  // than the tolerance, is not credited the idle gap: a step's compute
  // shorter than the tolerance does not hide its transfer.
  const absl::Time ready = busy_until + tolerance / 2;
  ExpectNear(shaper.ReserveSend(1000000, ready), ready + absl::Seconds(1));
  last = ready + absl::Seconds(1);
  // After a pause longer than the tolerance the link was idle: the
  // transfer takes its full time from when it is ready.
  const absl::Time after_pause = last + absl::Seconds(10);
  ExpectNear(shaper.ReserveSend(1000000, after_pause),
             after_pause + absl::Seconds(1));
  // The default burst grows with the rate (kBurstTime worth at 25 Gbit).
  LinkShaper fast(LinkLimit{3.125e9, absl::ZeroDuration()});
  EXPECT_EQ(fast.burst_bytes(),
            static_cast<int64_t>(
                3.125e9 * absl::ToDoubleSeconds(LinkShaper::kBurstTime)));
}

TEST(LinkShaperTest, UnlimitedImposesNoDelay) {
  LinkShaper shaper(LinkLimit{});
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(shaper.ReserveSend(int64_t{1} << 30, kT0), kT0);
    EXPECT_EQ(shaper.ReserveReceive(int64_t{1} << 30, kT0), kT0);
  }
  EXPECT_EQ(shaper.stats().send_delay, absl::ZeroDuration());
  EXPECT_EQ(shaper.stats().receive_delay, absl::ZeroDuration());
  // Latency alone delays each message by exactly the latency.
  LinkShaper latency_only(LinkLimit{0, absl::Microseconds(50)});
  EXPECT_EQ(latency_only.ReserveSend(int64_t{1} << 30, kT0),
            kT0 + absl::Microseconds(50));
  EXPECT_EQ(latency_only.ReserveSend(1, kT0), kT0 + absl::Microseconds(50));
  EXPECT_EQ(latency_only.ReserveReceive(1, kT0), kT0);
}

TEST(LinkShaperTest, ConcurrentCallersNeverOverlap) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 500;
  LinkShaper shaper(LinkLimit{1e6, absl::ZeroDuration()}, 0);
  absl::Mutex mu;
  std::vector<absl::Time> releases;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      std::vector<absl::Time> mine;
      for (int i = 0; i < kPerThread; ++i) {
        mine.push_back(shaper.ReserveSend(1000, kT0));
      }
      absl::MutexLock lock(&mu);
      releases.insert(releases.end(), mine.begin(), mine.end());
    });
  }
  for (auto& thread : threads) thread.join();
  std::sort(releases.begin(), releases.end());
  ASSERT_EQ(releases.size(), size_t{kThreads * kPerThread});
  // Every message ends its own 1 ms slot: consecutive ends 1 ms apart, the
  // last after all of them.
  for (size_t i = 1; i < releases.size(); ++i) {
    ASSERT_GE(releases[i] - releases[i - 1], absl::Microseconds(999)) << i;
  }
  ExpectNear(releases.back(),
             kT0 + absl::Seconds(kThreads * kPerThread / 1000));
}

TEST(LinkShaperTest, RunAtRunsInTimeOrderNotBefore) {
  LinkShaper shaper(LinkLimit{1e6, absl::ZeroDuration()});
  absl::Mutex mu;
  std::vector<int> order;
  std::vector<absl::Duration> early;  // how early each ran (never > 0)
  absl::Notification done;
  const absl::Time start = absl::Now();
  const int delays_ms[] = {40, 10, 30, 0, 20};
  std::atomic<int> left{5};
  for (int id = 0; id < 5; ++id) {
    const absl::Time when = start + absl::Milliseconds(delays_ms[id]);
    shaper.RunAt(when, [&, id, when] {
      absl::MutexLock lock(&mu);
      order.push_back(id);
      early.push_back(when - absl::Now());
      if (--left == 0) done.Notify();
    });
  }
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  absl::MutexLock lock(&mu);
  EXPECT_EQ(order, (std::vector<int>{3, 1, 4, 2, 0}));
  for (absl::Duration d : early) EXPECT_LE(d, absl::ZeroDuration());
}

TEST(LinkShaperTest, DestructionRunsPendingContinuationsAtOnce) {
  std::atomic<int> ran{0};
  const absl::Time start = absl::Now();
  {
    LinkShaper shaper(LinkLimit{1e6, absl::ZeroDuration()});
    for (int i = 0; i < 3; ++i) {
      shaper.RunAt(start + absl::Hours(1), [&] { ++ran; });
    }
  }
  EXPECT_EQ(ran.load(), 3);
  EXPECT_LT(absl::Now() - start, absl::Minutes(1));
}

}  // namespace
}  // namespace ferry

#include "ring/ring_collective.h"

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ring/in_memory_ring.h"
#include "tests/ring/ring_test_fixture.h"
#include "tests/testing/wait_until.h"

namespace ferry {
namespace {

using ::ferry::testing::RunOnAllRanks;
using ::testing::HasSubstr;

// |segment s| of count elements over n ranks, s taken mod n.
int64_t SegmentSize(int64_t count, int n, int s) {
  s = ((s % n) + n) % n;
  return (s + 1) * count / n - s * count / n;
}

// A small integer, different for every rank and element, so sums are exact.
float Input(int rank, int64_t i) {
  return static_cast<float>((i * 7 + rank * 13) % 11 - 5);
}

void CheckAllReduce(int n, int64_t count, int64_t piece) {
  SCOPED_TRACE(::testing::Message()
               << "n=" << n << " count=" << count << " piece=" << piece);
  InMemoryRingHub hub(n);
  std::vector<std::vector<float>> data(n, std::vector<float>(count));
  std::vector<float> expected(count, 0.0f);
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < count; ++i) {
      data[r][i] = Input(r, i);
      expected[i] += data[r][i];
    }
  }
  const std::vector<absl::Status> statuses = RunOnAllRanks(n, [&](int r) {
    RingCollective ring(hub.transport(r), {.piece_elements = piece,
                                           .timeout = absl::Seconds(10)});
    return ring.AllReduceSum(/*op_id=*/42, data[r].data(), count);
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
    for (int64_t i = 0; i < count; ++i) {
      ASSERT_EQ(data[r][i], expected[i]) << "rank " << r << " element " << i;
    }
    if (count >
        0) {  // bit for bit; memcmp of an empty vector's null data is UB
      EXPECT_EQ(
          std::memcmp(data[r].data(), data[0].data(), sizeof(float) * count),
          0);
    }
    // Sends: own segment, then every received segment but the last one.
    int64_t sent = 0;
    int64_t received = 0;
    for (int k = 0; k <= 2 * n - 3; ++k) {
      sent += SegmentSize(count, n, r - k);
      received += SegmentSize(count, n, r - k - 1);
    }
    EXPECT_EQ(hub.bytes_sent(r), 4 * sent) << "rank " << r;
    EXPECT_EQ(hub.bytes_received(r), 4 * received) << "rank " << r;
  }
}

TEST(RingCollectiveTest, AllReduceSumIsThePlainSumForAwkwardShapes) {
  for (int n : {1, 2, 3, 5}) {
    for (int64_t count : {0, 1, 7, 1000, 10007}) {
      for (int64_t piece :
           {int64_t{1}, int64_t{3}, int64_t{64}, int64_t{1} << 20}) {
        if (piece == 1 && count > 1000) continue;  // keep the test fast
        CheckAllReduce(n, count, piece);
      }
    }
  }
}

TEST(RingCollectiveTest, AllReduceSumByteCountIsTwoNMinusOneOverN) {
  // 4 ranks, 1000 elements: segments of 250, each rank sends 6 of them.
  InMemoryRingHub hub(4);
  std::vector<std::vector<float>> data(4, std::vector<float>(1000, 1.0f));
  const auto statuses = RunOnAllRanks(4, [&](int r) {
    return RingCollective(hub.transport(r))
        .AllReduceSum(0, data[r].data(), 1000);
  });
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(statuses[r].ok()) << statuses[r];
    EXPECT_EQ(hub.bytes_sent(r), 4 * 2 * 3 * 1000 / 4);
    EXPECT_EQ(data[r][999], 4.0f);
  }
}

TEST(RingCollectiveTest, RanksEndBitwiseIdenticalWithInexactSums) {
  constexpr int kRanks = 5;
  constexpr int64_t kCount = 4099;
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  InMemoryRingHub hub(kRanks);
  std::vector<std::vector<float>> data(kRanks, std::vector<float>(kCount));
  for (auto& v : data) {
    for (float& x : v) x = dist(gen) * 1e-3f + dist(gen) * 1e3f;
  }
  const auto statuses = RunOnAllRanks(kRanks, [&](int r) {
    return RingCollective(hub.transport(r), {.piece_elements = 100})
        .AllReduceSum(1, data[r].data(), kCount);
  });
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(statuses[r].ok()) << statuses[r];
    EXPECT_EQ(
        std::memcmp(data[r].data(), data[0].data(), sizeof(float) * kCount), 0)
        << "rank " << r;
  }
}

TEST(RingCollectiveTest, SuccessiveCollectivesOnOneTransport) {
  constexpr int kRanks = 3;
  InMemoryRingHub hub(kRanks);
  std::vector<std::vector<float>> data(kRanks, std::vector<float>(50, 1.0f));
  const auto statuses = RunOnAllRanks(kRanks, [&](int r) -> absl::Status {
    RingCollective ring(hub.transport(r), {.piece_elements = 8});
    for (int64_t op = 0; op < 4; ++op) {
      absl::Status s = ring.AllReduceSum(op, data[r].data(), 50);
      if (!s.ok()) return s;
    }
    return ring.Broadcast(4, data[r].data(), 50, /*root=*/2);
  });
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(statuses[r].ok()) << statuses[r];
    EXPECT_EQ(data[r], std::vector<float>(50, 81.0f));
  }
}

TEST(RingCollectiveTest, BroadcastFromEveryRoot) {
  for (int n : {1, 2, 3, 5}) {
    for (int root = 0; root < n; ++root) {
      for (int64_t count : {0, 1, 1000, 10007}) {
        for (int64_t piece : {int64_t{3}, int64_t{64}, int64_t{1} << 20}) {
          SCOPED_TRACE(::testing::Message()
                       << "n=" << n << " root=" << root << " count=" << count
                       << " piece=" << piece);
          InMemoryRingHub hub(n);
          std::vector<std::vector<float>> data(
              n, std::vector<float>(count, -1.0f));
          for (int64_t i = 0; i < count; ++i) data[root][i] = Input(root, i);
          const std::vector<float> want = data[root];
          const auto statuses = RunOnAllRanks(n, [&](int r) {
            return RingCollective(hub.transport(r), {.piece_elements = piece})
                .Broadcast(9, data[r].data(), count, root);
          });
          for (int r = 0; r < n; ++r) {
            ASSERT_TRUE(statuses[r].ok())
                << "rank " << r << ": " << statuses[r];
            EXPECT_EQ(data[r], want) << "rank " << r;
            const bool last = (r + 1) % n == root;
            EXPECT_EQ(hub.bytes_sent(r), last ? 0 : 4 * count) << "rank " << r;
            EXPECT_EQ(hub.bytes_received(r), r == root ? 0 : 4 * count);
          }
        }
      }
    }
  }
}

TEST(RingCollectiveTest, RejectsInvalidArguments) {
  InMemoryRingHub hub(3);
  RingCollective ring(hub.transport(0));
  float x = 0;
  EXPECT_EQ(ring.Broadcast(0, &x, 1, -1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ring.Broadcast(0, &x, 1, 3).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ring.Broadcast(0, &x, -1, 0).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ring.AllReduceSum(0, &x, -1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ring.AllReduceSum(0, nullptr, 1).code(),
            absl::StatusCode::kInvalidArgument);
  RingCollective no_pieces(hub.transport(0), {.piece_elements = 0});
  EXPECT_EQ(no_pieces.AllReduceSum(0, &x, 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(hub.bytes_sent(0), 0);
}

TEST(RingCollectiveTest, SilencedRankMakesEveryoneFailByTheDeadline) {
  constexpr int kRanks = 3;
  const absl::Duration timeout = absl::Milliseconds(200);
  InMemoryRingHub hub(kRanks);
  hub.Silence(1);
  std::vector<std::vector<float>> data(kRanks, std::vector<float>(300, 1.0f));
  std::vector<absl::Duration> took(kRanks);
  const auto statuses = RunOnAllRanks(kRanks, [&](int r) {
    const absl::Time start = absl::Now();
    absl::Status s = RingCollective(hub.transport(r),
                                    {.piece_elements = 64, .timeout = timeout})
                         .AllReduceSum(7, data[r].data(), 300);
    took[r] = absl::Now() - start;
    return s;
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kDeadlineExceeded)
        << "rank " << r << ": " << statuses[r];
    EXPECT_GE(took[r], timeout - absl::Milliseconds(5)) << "rank " << r;
    EXPECT_LT(took[r], timeout + absl::Milliseconds(500)) << "rank " << r;
  }
  // Rank 2 never hears from rank 1: its first receive fails.
  EXPECT_THAT(std::string(statuses[2].message()),
              HasSubstr("AllReduceSum op 7 stage 0"));
  EXPECT_THAT(std::string(statuses[2].message()), HasSubstr("from rank 1"));
}

TEST(RingCollectiveTest, BroadcastFailsByTheDeadlineWhenTheRootIsSilent) {
  InMemoryRingHub hub(2);
  hub.Silence(0);
  float x = 0;
  const absl::Time start = absl::Now();
  const absl::Status s =
      RingCollective(hub.transport(1), {.timeout = absl::Milliseconds(100)})
          .Broadcast(3, &x, 1, /*root=*/0);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("Broadcast op 3"));
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(600));
}

TEST(RingCollectiveTest, AbortCancelsARunningAllReduce) {
  InMemoryRingHub hub(2);  // rank 1 never shows up
  std::vector<float> data(10, 1.0f);
  absl::Status s;
  std::thread rank0([&] {
    s = RingCollective(hub.transport(0)).AllReduceSum(5, data.data(), 10);
  });
  const absl::Status blocked =
      testutil::WaitUntil("rank 0 to wait for rank 1",
                          [&] { return hub.blocked_receivers(0) > 0; });
  EXPECT_TRUE(blocked.ok()) << blocked;
  hub.transport(0)->Abort();
  rank0.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("AllReduceSum op 5"));
}

TEST(RingCollectiveTest, MismatchedCountsAreDataLoss) {
  InMemoryRingHub hub(2);
  std::vector<float> a(10), b(12);
  const auto statuses = RunOnAllRanks(2, [&](int r) {
    RingCollective ring(hub.transport(r), {.timeout = absl::Seconds(2)});
    return r == 0 ? ring.AllReduceSum(1, a.data(), 10)
                  : ring.AllReduceSum(1, b.data(), 12);
  });
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kDataLoss) << statuses[0];
  EXPECT_EQ(statuses[1].code(), absl::StatusCode::kDataLoss) << statuses[1];
}

}  // namespace
}  // namespace ferry

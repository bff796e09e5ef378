// RingCollective::ReduceScatterSum and AllGather with caller-chosen owned
// ranges (the sharded optimizer state's slices of one gradient bucket).
#include <vector>

#include "absl/time/time.h"
#include "common/sharding.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ring/in_memory_ring.h"
#include "ring/ring_collective.h"
#include "tests/ring/ring_test_fixture.h"

namespace ferry {
namespace {

using ::ferry::testing::RunOnAllRanks;
using ::testing::HasSubstr;

// Small integers, different per rank and element: sums are exact.
float OwnedInput(int rank, int64_t i) {
  return static_cast<float>((i * 5 + rank * 3) % 13 - 6);
}

// A bucket's share of every rank's ShardRange slice of `total`.
std::vector<FlatRange> BucketShares(int64_t total, int n, int64_t begin,
                                    int64_t end) {
  std::vector<FlatRange> slices;
  for (int q = 0; q < n; ++q) slices.push_back(ShardRange(total, n, q));
  return SharesOfRange(slices, begin, end);
}

void CheckScatterThenGather(int n, int64_t count,
                            const std::vector<FlatRange>& owned,
                            int64_t piece) {
  SCOPED_TRACE(::testing::Message()
               << "n=" << n << " count=" << count << " piece=" << piece);
  InMemoryRingHub hub(n);
  std::vector<std::vector<float>> data(n, std::vector<float>(count));
  std::vector<float> sum(count, 0.0f);
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < count; ++i) {
      data[r][i] = OwnedInput(r, i);
      sum[i] += data[r][i];
    }
  }
  std::vector<absl::Status> statuses = RunOnAllRanks(n, [&](int r) {
    RingCollective ring(hub.transport(r), {.piece_elements = piece,
                                           .timeout = absl::Seconds(10)});
    return ring.ReduceScatterSum(7, data[r].data(), count, owned);
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
    for (int64_t i = owned[r].begin; i < owned[r].end; ++i) {
      ASSERT_EQ(data[r][i], sum[i]) << "rank " << r << " element " << i;
    }
  }
  for (int r = 0; r < n; ++r) {
    const int64_t sent = hub.bytes_sent(r);
    // Rank r sends segments r, r-1, ..., r-n+2: every one but segment
    // r + 1, which is rank r's own range.
    int64_t others = 0;
    for (int q = 0; q < n; ++q) {
      if (q != r) others += owned[q].size();
    }
    EXPECT_EQ(sent, 4 * others) << "rank " << r;
  }
  // Each rank now updates its own range (here: doubles it), then gathers.
  for (int r = 0; r < n; ++r) {
    for (int64_t i = owned[r].begin; i < owned[r].end; ++i) data[r][i] *= 2;
  }
  statuses = RunOnAllRanks(n, [&](int r) {
    RingCollective ring(hub.transport(r), {.piece_elements = piece,
                                           .timeout = absl::Seconds(10)});
    return ring.AllGather(8, data[r].data(), count, owned);
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
    for (int64_t i = 0; i < count; ++i) {
      ASSERT_EQ(data[r][i], 2 * sum[i]) << "rank " << r << " element " << i;
    }
  }
}

TEST(RingReduceScatterTest, OwnedRangesOfABucketSumThenGatherEverywhere) {
  for (int n : {1, 2, 3, 4}) {
    for (int64_t total : {int64_t{5}, int64_t{1000}, int64_t{10007}}) {
      // The whole buffer as one bucket, and a bucket inside one slice.
      CheckScatterThenGather(n, total, BucketShares(total, n, 0, total), 64);
      const int64_t begin = total / 3;
      const int64_t end = std::min(total, begin + total / 7 + 1);
      CheckScatterThenGather(n, end - begin, BucketShares(total, n, begin, end),
                             3);
    }
  }
}

TEST(RingReduceScatterTest, RefusesRangesThatDoNotTileTheBuffer) {
  InMemoryRingHub hub(2);
  std::vector<float> data(10, 1.0f);
  RingCollective ring(hub.transport(0), {.timeout = absl::Milliseconds(50)});
  EXPECT_THAT(ring.ReduceScatterSum(1, data.data(), 10, {{0, 5}}).message(),
              HasSubstr("1 owned ranges for 2 ranks"));
  EXPECT_THAT(
      ring.ReduceScatterSum(1, data.data(), 10, {{0, 5}, {4, 10}}).message(),
      HasSubstr("do not tile [0, 10)"));
  EXPECT_THAT(ring.AllGather(1, data.data(), 10, {{0, 5}, {5, 9}}).message(),
              HasSubstr("do not tile [0, 10)"));
  EXPECT_EQ(data, std::vector<float>(10, 1.0f));
  EXPECT_EQ(hub.bytes_sent(0), 0);
}

}  // namespace
}  // namespace ferry

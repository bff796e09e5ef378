#include "ring/bucket_reducer.h"

#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ring/bucket_plan.h"
#include "ring/in_memory_ring.h"
#include "ring/ring_collective.h"
#include "tests/ring/ring_test_fixture.h"
#include "tests/testing/wait_until.h"

namespace ferry {
namespace {

using ::ferry::testing::RunOnAllRanks;
using ::testing::HasSubstr;

// Declares every tensor, last to first, in odd-sized slices taken from the
// tensor's end backward (1, 2, 3, 5, 8, ... elements); the two first tensors
// are declared together by one range that spans them.
absl::Status DeclareLikeABackwardPass(BucketAllReducer& reducer,
                                      const std::vector<int64_t>& sizes) {
  std::vector<int64_t> start(sizes.size());
  std::exclusive_scan(sizes.begin(), sizes.end(), start.begin(), int64_t{0});
  for (size_t t = sizes.size(); t-- > 2;) {
    int64_t end = start[t] + sizes[t];
    int64_t a = 1, b = 2;
    while (end > start[t]) {
      const int64_t len = std::min(a, end - start[t]);
      if (absl::Status s = reducer.Ready(end - len, len); !s.ok()) return s;
      end -= len;
      const int64_t next = a + b;
      a = b;
      b = next;
    }
  }
  return reducer.Ready(0, sizes[0] + sizes[1]);
}

TEST(BucketAllReducerTest, ThreeRanksSumTheGradientInEveryBucket) {
  constexpr int kRanks = 3;
  const std::vector<int64_t> sizes = {7, 100, 3, 1000, 0, 13};
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  auto plan = PlanBuckets(sizes, 128);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_GT(plan->size(), 5u);

  InMemoryRingHub hub(kRanks);
  std::vector<std::vector<float>> grads(kRanks, std::vector<float>(total));
  std::vector<float> expected(total);
  const auto statuses = RunOnAllRanks(kRanks, [&](int r) -> absl::Status {
    RingCollective ring(hub.transport(r),
                        {.piece_elements = 16, .timeout = absl::Seconds(10)});
    BucketAllReducer reducer(&ring, *plan, grads[r].data());
    for (int step = 0; step < 2; ++step) {
      for (int64_t i = 0; i < total; ++i) {
        grads[r][i] = static_cast<float>((i + r * 5 + step) % 9 - 4);
      }
      reducer.Start(/*first_op_id=*/1000 +
                    step * static_cast<int64_t>(plan->size()));
      if (absl::Status s = DeclareLikeABackwardPass(reducer, sizes); !s.ok()) {
        return s;
      }
      if (absl::Status s = reducer.Finish(); !s.ok()) return s;
    }
    return absl::OkStatus();
  });
  for (int64_t i = 0; i < total; ++i) {
    expected[i] = 0;
    for (int r = 0; r < kRanks; ++r) expected[i] += (i + r * 5 + 1) % 9 - 4;
  }
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
    EXPECT_EQ(grads[r], expected) << "rank " << r;
    EXPECT_EQ(
        std::memcmp(grads[r].data(), grads[0].data(), sizeof(float) * total),
        0);
  }
}

TEST(BucketAllReducerTest, OneRangeCanCompleteSeveralBuckets) {
  constexpr int kRanks = 2;
  const std::vector<Bucket> plan = {{30, 10}, {10, 20}, {0, 10}};
  InMemoryRingHub hub(kRanks);
  std::vector<std::vector<float>> grads(kRanks, std::vector<float>(40, 1.0f));
  const auto statuses = RunOnAllRanks(kRanks, [&](int r) -> absl::Status {
    RingCollective ring(hub.transport(r), {.piece_elements = 4});
    BucketAllReducer reducer(&ring, plan, grads[r].data());
    reducer.Start(0);
    if (absl::Status s = reducer.Ready(5, 35); !s.ok()) return s;
    if (absl::Status s = reducer.Ready(0, 5); !s.ok()) return s;
    return reducer.Finish();
  });
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(statuses[r].ok()) << statuses[r];
    EXPECT_EQ(grads[r], std::vector<float>(40, 2.0f));
  }
}

TEST(BucketAllReducerTest, RejectsMisuse) {
  InMemoryRingHub hub(1);
  RingCollective ring(hub.transport(0));
  std::vector<float> grads(20, 3.0f);
  BucketAllReducer reducer(&ring, {{10, 10}, {0, 10}}, grads.data());
  EXPECT_EQ(reducer.total_elements(), 20);
  EXPECT_EQ(reducer.Ready(0, 1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(reducer.Finish().code(), absl::StatusCode::kFailedPrecondition);

  reducer.Start(0);
  EXPECT_EQ(reducer.Ready(-1, 2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reducer.Ready(15, 6).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reducer.Ready(3, -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(reducer.Ready(20, 0).ok());
  EXPECT_TRUE(reducer.Ready(4, 8).ok());
  EXPECT_EQ(reducer.Ready(11, 2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reducer.Ready(0, 5).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reducer.Ready(4, 8).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reducer.Ready(2, 20).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(reducer.Ready(0, 4).ok());
  EXPECT_TRUE(reducer.Ready(12, 7).ok());
  const absl::Status missing = reducer.Finish();  // element 19 never declared
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition) << missing;
  EXPECT_THAT(std::string(missing.message()), HasSubstr("1 of 20"));
  EXPECT_EQ(reducer.Ready(0, 1).code(), absl::StatusCode::kFailedPrecondition);

  // The next step starts from scratch.
  reducer.Start(2);
  EXPECT_TRUE(reducer.Ready(0, 20).ok());
  EXPECT_TRUE(reducer.Finish().ok());
  EXPECT_EQ(grads, std::vector<float>(20, 3.0f));  // one rank: sum = itself
}

TEST(BucketAllReducerTest, InvalidPlanIsReported) {
  InMemoryRingHub hub(1);
  RingCollective ring(hub.transport(0));
  std::vector<float> grads(20);
  for (const std::vector<Bucket>& plan :
       {std::vector<Bucket>{{0, 10}, {11, 9}}, std::vector<Bucket>{{0, 0}},
        std::vector<Bucket>{{0, 10}, {5, 10}}, std::vector<Bucket>{{1, 5}}}) {
    BucketAllReducer reducer(&ring, plan, grads.data());
    reducer.Start(0);
    EXPECT_EQ(reducer.Ready(0, 1).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(reducer.Finish().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(BucketAllReducerTest, EmptyPlanFinishesAtOnce) {
  InMemoryRingHub hub(1);
  RingCollective ring(hub.transport(0));
  BucketAllReducer reducer(&ring, {}, nullptr);
  reducer.Start(0);
  EXPECT_TRUE(reducer.Ready(0, 0).ok());
  EXPECT_TRUE(reducer.Finish().ok());
}

TEST(BucketAllReducerTest, BrokenRingCostsOneTimeoutNotOnePerBucket) {
  constexpr int kRanks = 2;
  const absl::Duration timeout = absl::Milliseconds(150);
  InMemoryRingHub hub(kRanks);
  hub.Silence(1);
  auto plan = PlanBuckets({10, 10, 10, 10, 10, 10}, 10);
  ASSERT_TRUE(plan.ok());
  std::vector<std::vector<float>> grads(kRanks, std::vector<float>(60, 1.0f));
  std::vector<absl::Duration> took(kRanks);
  const auto statuses = RunOnAllRanks(kRanks, [&](int r) {
    const absl::Time start = absl::Now();
    RingCollective ring(hub.transport(r), {.timeout = timeout});
    BucketAllReducer reducer(&ring, *plan, grads[r].data());
    reducer.Start(0);
    for (int64_t off = 50; off >= 0; off -= 10) {
      if (absl::Status s = reducer.Ready(off, 10); !s.ok()) return s;
    }
    absl::Status s = reducer.Finish();
    took[r] = absl::Now() - start;
    return s;
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kDeadlineExceeded)
        << statuses[r];
    EXPECT_THAT(std::string(statuses[r].message()), HasSubstr("bucket 0"));
    EXPECT_LT(took[r], timeout + absl::Milliseconds(400)) << "rank " << r;
  }
}

TEST(BucketAllReducerTest, DestructorDoesNotHangMidStep) {
  InMemoryRingHub hub(2);  // rank 1 never shows up
  RingCollective ring(hub.transport(0), {.timeout = absl::Milliseconds(100)});
  std::vector<float> grads(30, 1.0f);
  const absl::Time start = absl::Now();
  {
    BucketAllReducer reducer(&ring, {{20, 10}, {10, 10}, {0, 10}},
                             grads.data());
    reducer.Start(0);
    ASSERT_TRUE(reducer.Ready(0, 30).ok());
    // The first bucket is in flight: blocked on the silent rank 1.
    const absl::Status started =
        testutil::WaitUntil("the first bucket to wait for rank 1",
                            [&] { return hub.blocked_receivers(0) > 0; });
    ASSERT_TRUE(started.ok()) << started;
  }  // the bucket in flight runs into its deadline, the others are dropped
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(600));
}

}  // namespace
}  // namespace ferry

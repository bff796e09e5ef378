#include "ring/bucket_plan.h"

#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

std::vector<Bucket> Plan(const std::vector<int64_t>& sizes, int64_t b) {
  auto plan = PlanBuckets(sizes, b);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : std::vector<Bucket>{};
}

// {offset, length} per bucket, for readable comparisons.
std::vector<std::pair<int64_t, int64_t>> Pairs(
    const std::vector<int64_t>& sizes, int64_t b) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const Bucket& bucket : Plan(sizes, b)) {
    out.emplace_back(bucket.offset, bucket.length);
  }
  return out;
}

// The plan partitions [0, total) into contiguous buckets of 1..b elements
// listed by decreasing offset; a bucket boundary inside a tensor only occurs
// in a tensor larger than b, at a multiple of b from its end; and the greedy
// walk closed a bucket only when the tensor below it did not fit.
void ExpectValidPlan(const std::vector<int64_t>& sizes, int64_t b) {
  SCOPED_TRACE(::testing::Message()
               << "b=" << b << " tensors=" << sizes.size());
  const std::vector<Bucket> plan = Plan(sizes, b);
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  int64_t end = total;
  for (const Bucket& bucket : plan) {
    EXPECT_EQ(bucket.offset + bucket.length, end);
    EXPECT_GE(bucket.length, 1);
    EXPECT_LE(bucket.length, b);
    end = bucket.offset;
  }
  EXPECT_EQ(end, 0);

  // Tensor t covers [start[t], start[t] + sizes[t]).
  std::vector<int64_t> start(sizes.size());
  for (size_t t = 0, off = 0; t < sizes.size(); off += sizes[t], ++t) {
    start[t] = off;
  }
  for (size_t i = 0; i + 1 < plan.size(); ++i) {
    const int64_t boundary = plan[i].offset;  // between plan[i + 1] and plan[i]
    for (size_t t = 0; t < sizes.size(); ++t) {
      const int64_t tensor_end = start[t] + sizes[t];
      if (boundary > start[t] && boundary < tensor_end) {  // inside tensor t
        EXPECT_GT(sizes[t], b) << "split a tensor that fits, tensor " << t;
        EXPECT_EQ((tensor_end - boundary) % b, 0) << "tensor " << t;
      }
      if (boundary == tensor_end && sizes[t] > 0) {  // tensor t just below
        EXPECT_GT(plan[i].length + sizes[t], b)
            << "bucket " << i << " could have taken tensor " << t;
      }
    }
  }
}

TEST(BucketPlanTest, HandPickedPlans) {
  using V = std::vector<std::pair<int64_t, int64_t>>;  // {offset, length}
  EXPECT_EQ(Pairs({}, 4), V{});
  EXPECT_EQ(Pairs({0, 0}, 4), V{});
  EXPECT_EQ(Pairs({1}, 1), (V{{0, 1}}));
  EXPECT_EQ(Pairs({1, 1, 1}, 2), (V{{1, 2}, {0, 1}}));
  EXPECT_EQ(Pairs({4, 4, 4}, 4), (V{{8, 4}, {4, 4}, {0, 4}}));
  EXPECT_EQ(Pairs({4, 4, 4}, 8), (V{{4, 8}, {0, 4}}));
  EXPECT_EQ(Pairs({4, 4, 4}, 12), (V{{0, 12}}));
  EXPECT_EQ(Pairs({3, 0, 2, 0}, 5), (V{{0, 5}}));
  // A tensor larger than a bucket is cut from its end backward; the
  // remainder at its start opens the next bucket.
  EXPECT_EQ(Pairs({10}, 4), (V{{6, 4}, {2, 4}, {0, 2}}));
  EXPECT_EQ(Pairs({3, 10}, 4), (V{{9, 4}, {5, 4}, {3, 2}, {0, 3}}));
  EXPECT_EQ(Pairs({2, 10}, 4), (V{{8, 4}, {4, 4}, {0, 4}}));
  EXPECT_EQ(Pairs({8}, 4), (V{{4, 4}, {0, 4}}));
  EXPECT_EQ(Pairs({5, 3}, 4), (V{{5, 3}, {1, 4}, {0, 1}}));
  // The default MLP: 784x256, 256, 256x128, 128, 128x10, 10.
  EXPECT_EQ(Pairs({200704, 256, 32768, 128, 1280, 10}, 65536),
            (V{{200704, 34442},
               {135168, 65536},
               {69632, 65536},
               {4096, 65536},
               {0, 4096}}));
}

// BatchNorm state (the trailing tensors) gets buckets of its own, listed
// after every parameter bucket: it is declared after the backward pass.
TEST(BucketPlanTest, StateTensorsGetTheirOwnBucketsLast) {
  using V = std::vector<std::pair<int64_t, int64_t>>;
  const auto pairs = [](const std::vector<int64_t>& sizes, int64_t b,
                        int64_t state) {
    auto plan = PlanBucketsWithState(sizes, b, state);
    EXPECT_TRUE(plan.ok()) << plan.status();
    V out;
    if (plan.ok())
      for (const Bucket& x : *plan) out.emplace_back(x.offset, x.length);
    return out;
  };
  // Parameters {4, 2}, state {2, 2, 1}: without the split the state would
  // share the first bucket with the last parameters.
  EXPECT_EQ(Pairs({4, 2, 2, 2, 1}, 8), (V{{4, 7}, {0, 4}}));
  EXPECT_EQ(pairs({4, 2, 2, 2, 1}, 8, 5), (V{{0, 6}, {6, 5}}));
  EXPECT_EQ(pairs({4, 2, 2, 2, 1}, 4, 5), (V{{4, 2}, {0, 4}, {8, 3}, {6, 2}}));
  EXPECT_EQ(pairs({4, 2}, 8, 0), Pairs({4, 2}, 8));
  // The state must be exactly some trailing tensors.
  EXPECT_EQ(PlanBucketsWithState({4, 2, 2}, 8, 3).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanBucketsWithState({4, 2}, 8, 7).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BucketPlanTest, ExhaustiveSmallModels) {
  const std::vector<int64_t> sizes_to_try = {0, 1, 2, 3, 5, 7};
  const int kMaxTensors = 4;
  for (int n = 0; n <= kMaxTensors; ++n) {
    int combos = 1;
    for (int i = 0; i < n; ++i) combos *= static_cast<int>(sizes_to_try.size());
    for (int c = 0; c < combos; ++c) {
      std::vector<int64_t> sizes;
      for (int i = 0, rest = c; i < n; ++i, rest /= sizes_to_try.size()) {
        sizes.push_back(sizes_to_try[rest % sizes_to_try.size()]);
      }
      for (int64_t b = 1; b <= 8; ++b) ExpectValidPlan(sizes, b);
    }
  }
}

TEST(BucketPlanTest, RandomModelsArePartitioned) {
  std::mt19937 gen(1234);
  std::uniform_int_distribution<int> tensors(0, 12);
  std::uniform_int_distribution<int64_t> size(0, 3000);
  std::uniform_int_distribution<int64_t> bucket(1, 5000);
  for (int i = 0; i < 300; ++i) {
    std::vector<int64_t> sizes(tensors(gen));
    for (int64_t& s : sizes) s = size(gen);
    ExpectValidPlan(sizes, bucket(gen));
  }
}

TEST(BucketPlanTest, PrimeSizesWithDividingAndNonDividingBuckets) {
  const std::vector<int64_t> primes = {97, 89, 83, 79, 73, 2, 3};
  const int64_t total =
      std::accumulate(primes.begin(), primes.end(), int64_t{0});
  for (int64_t b : {int64_t{1}, int64_t{2}, int64_t{13}, int64_t{97},
                    int64_t{100}, total / 2, total - 1, total, total + 1}) {
    ExpectValidPlan(primes, b);
  }
  EXPECT_EQ(Plan(primes, total).size(), 1u);
  EXPECT_EQ(Plan(primes, 1).size(), static_cast<size_t>(total));
}

TEST(BucketPlanTest, RejectsInvalidArguments) {
  EXPECT_EQ(PlanBuckets({10}, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanBuckets({10}, -4).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanBuckets({10, -1}, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      PlanBuckets({int64_t{1} << 62, int64_t{1} << 62, int64_t{1} << 62}, 4)
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ferry

// RingCollective::AllReduceSumCompressed over the in-memory ring: fp16,
// bf16 and top-k on 2, 3 and 4 ranks, against the exact sum, identical on
// every rank, with the bytes each rank sends.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/gradient_codec.h"
#include "gtest/gtest.h"
#include "ring/bucket_reducer.h"
#include "ring/in_memory_ring.h"
#include "ring/ring_collective.h"
#include "tests/ring/ring_test_fixture.h"

namespace ferry {
namespace {

using ::ferry::testing::RunOnAllRanks;

std::vector<std::vector<float>> Inputs(int n, int64_t count) {
  std::mt19937 rng(1234 + n);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<std::vector<float>> data(n, std::vector<float>(count));
  for (auto& rank : data) {
    for (float& v : rank) v = dist(rng);
  }
  return data;
}

void ExpectIdenticalOnEveryRank(const std::vector<std::vector<float>>& data) {
  for (size_t r = 1; r < data.size(); ++r) {
    EXPECT_EQ(std::memcmp(data[r].data(), data[0].data(),
                          sizeof(float) * data[0].size()),
              0)
        << "rank " << r << " differs from rank 0";
  }
}

int64_t SegmentSize(int64_t count, int n, int s) {
  s = ((s % n) + n) % n;
  return (s + 1) * count / n - s * count / n;
}

class RingCompressionTest : public ::testing::TestWithParam<int> {};

TEST_P(RingCompressionTest, RoundedEncodingsSumWithinTheirError) {
  const int n = GetParam();
  for (GradientEncoding e :
       {GradientEncoding::kFp16, GradientEncoding::kBf16}) {
    for (bool feedback : {false, true}) {
      const int64_t count = 1009;  // prime: uneven segments and pieces
      SCOPED_TRACE(::testing::Message()
                   << "n=" << n << " encoding " << static_cast<int>(e)
                   << " feedback " << feedback);
      InMemoryRingHub hub(n);
      std::vector<std::vector<float>> data = Inputs(n, count);
      const std::vector<std::vector<float>> input = data;
      std::vector<std::vector<float>> residual(n,
                                               std::vector<float>(count, 0.0f));
      const GradientCompression c{e, 0, feedback};
      const std::vector<absl::Status> statuses = RunOnAllRanks(n, [&](int r) {
        RingCollective ring(hub.transport(r), {.piece_elements = 100,
                                               .timeout = absl::Seconds(10)});
        return ring.AllReduceSumCompressed(
            7, data[r].data(), count, c,
            feedback ? residual[r].data() : nullptr);
      });
      const double unit = e == GradientEncoding::kFp16 ? std::ldexp(1.0, -11)
                                                       : std::ldexp(1.0, -8);
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(statuses[r].ok()) << statuses[r];
      }
      for (int64_t i = 0; i < count; ++i) {
        double exact = 0, magnitude = 0;
        for (int r = 0; r < n; ++r) {
          exact += input[r][i];
          magnitude += std::fabs(input[r][i]);
        }
        // One rounding of each rank's value and of each partial sum.
        ASSERT_NEAR(data[0][i], exact, 2 * (n + 1) * unit * magnitude)
            << "element " << i;
        if (feedback) {
          // This rank's own rounding error is kept for the next step.
          EXPECT_EQ(residual[1][i], input[1][i] - RoundTrip(e, input[1][i]));
        }
      }
      ExpectIdenticalOnEveryRank(data);
      // Half of what fp32 sends: own segment plus every received segment
      // but the last, 2 bytes per element.
      for (int r = 0; r < n; ++r) {
        int64_t sent = SegmentSize(count, n, r);
        for (int k = 0; k < 2 * n - 3; ++k)
          sent += SegmentSize(count, n, r - k - 1);
        EXPECT_EQ(hub.bytes_sent(r), 2 * sent) << "rank " << r;
      }
    }
  }
}

TEST_P(RingCompressionTest, TopKIsTheSumOfEveryRanksSelection) {
  const int n = GetParam();
  const int64_t count = 1009, piece = 300;
  const double ratio = 0.05;
  InMemoryRingHub hub(n);
  std::vector<std::vector<float>> data = Inputs(n, count);
  const std::vector<std::vector<float>> input = data;
  std::vector<std::vector<float>> residual(n, std::vector<float>(count, 0.0f));
  const GradientCompression c{GradientEncoding::kTopK, ratio, true};
  const std::vector<absl::Status> statuses = RunOnAllRanks(n, [&](int r) {
    RingCollective ring(hub.transport(r), {.piece_elements = piece,
                                           .timeout = absl::Seconds(10)});
    return ring.AllReduceSumCompressed(9, data[r].data(), count, c,
                                       residual[r].data());
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(statuses[r].ok()) << statuses[r];
  // Expected: per piece, each rank's top-k decoded, summed in rank order.
  std::vector<float> expected(count, 0.0f);
  int64_t bytes_per_rank = 0;
  for (int64_t begin = 0; begin < count; begin += piece) {
    const int64_t len = std::min(piece, count - begin);
    bytes_per_rank += EncodedBytes(GradientEncoding::kTopK, len, ratio);
    for (int r = 0; r < n; ++r) {
      std::string bytes;
      Encode(GradientEncoding::kTopK, input[r].data() + begin, len, ratio,
             &bytes);
      ASSERT_TRUE(Decode(GradientEncoding::kTopK, bytes, len,
                         expected.data() + begin, DecodeOp::kAdd)
                      .ok());
      // What was not sent stays in the residual, what was sent left it.
      std::vector<float> sent(len);
      ASSERT_TRUE(
          Decode(GradientEncoding::kTopK, bytes, len, sent.data()).ok());
      for (int64_t i = 0; i < len; ++i) {
        ASSERT_EQ(residual[r][begin + i] + sent[i], input[r][begin + i]);
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < count; ++i) {
      ASSERT_EQ(data[r][i], expected[i]) << "rank " << r << " element " << i;
    }
    EXPECT_EQ(hub.bytes_sent(r), (n - 1) * bytes_per_rank) << "rank " << r;
  }
}

TEST_P(RingCompressionTest, BucketReducerCompressesEveryBucket) {
  const int n = GetParam();
  const int64_t count = 500;
  InMemoryRingHub hub(n);
  std::vector<std::vector<float>> data = Inputs(n, count);
  const std::vector<std::vector<float>> input = data;
  std::vector<std::vector<float>> residual(n, std::vector<float>(count, 0.0f));
  const std::vector<Bucket> plan = {{0, 200}, {200, 300}};
  const std::vector<absl::Status> statuses = RunOnAllRanks(n, [&](int r) {
    RingCollective ring(hub.transport(r),
                        {.piece_elements = 64, .timeout = absl::Seconds(10)});
    BucketAllReducer reducer(&ring, plan, data[r].data(),
                             {GradientEncoding::kBf16, 0, true},
                             residual[r].data());
    reducer.Start(100);
    if (absl::Status s = reducer.Ready(0, count); !s.ok()) return s;
    return reducer.Finish();
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(statuses[r].ok()) << statuses[r];
  ExpectIdenticalOnEveryRank(data);
  for (int64_t i = 0; i < count; ++i) {
    double exact = 0, magnitude = 0;
    for (int r = 0; r < n; ++r) {
      exact += input[r][i];
      magnitude += std::fabs(input[r][i]);
    }
    ASSERT_NEAR(data[0][i], exact,
                2 * (n + 1) * std::ldexp(1.0, -8) * magnitude);
  }
  // 2 bytes per element instead of 4.
  for (int r = 0; r < n; ++r) {
    EXPECT_LE(hub.bytes_sent(r), 2 * 2 * count) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, RingCompressionTest,
                         ::testing::Values(2, 3, 4));

TEST(RingCompressionErrorsTest, MalformedPayloadIsDataLoss) {
  InMemoryRingHub hub(2);
  std::vector<float> data(10, 1.0f);
  // Rank 0 sends a payload of the wrong size for its segment.
  ASSERT_TRUE(hub.transport(0)->SendBytes({5, 0, 0}, std::string(3, 'x')).ok());
  RingCollective ring(hub.transport(1),
                      {.piece_elements = 100, .timeout = absl::Seconds(2)});
  const absl::Status s = ring.AllReduceSumCompressed(
      5, data.data(), 10, {GradientEncoding::kFp16, 0, false}, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_EQ(ring.AllReduceSumCompressed(6, data.data(), 10,
                                        {GradientEncoding::kTopK, 0.0, false},
                                        nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ferry

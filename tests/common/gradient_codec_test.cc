#include "common/gradient_codec.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

constexpr GradientEncoding kAll[] = {
    GradientEncoding::kFp32, GradientEncoding::kFp16, GradientEncoding::kBf16,
    GradientEncoding::kTopK};

std::vector<float> RandomValues(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Largest relative error of one rounding.
double Tolerance(GradientEncoding e) {
  switch (e) {
    case GradientEncoding::kFp16:
      return std::ldexp(1.0, -11);
    case GradientEncoding::kBf16:
      return std::ldexp(1.0, -8);
    default:
      return 0;
  }
}

TEST(GradientCodecTest, Fp16RoundsToNearestEven) {
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);  // largest finite
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);  // rounds down
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // tie rounds to even: inf
  EXPECT_EQ(FloatToHalf(1e9f), 0x7c00);
  EXPECT_EQ(FloatToHalf(1.0f + 0x1p-11f), 0x3c00);      // tie -> even
  EXPECT_EQ(FloatToHalf(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(FloatToHalf(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);  // above tie
  EXPECT_EQ(FloatToHalf(0x1p-14f), 0x0400);  // smallest normal
  EXPECT_EQ(FloatToHalf(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalf(0x1p-25f), 0x0000);  // tie -> even (zero)
  EXPECT_EQ(FloatToHalf(1.5f * 0x1p-25f), 0x0001);
  EXPECT_EQ(FloatToHalf(3 * 0x1p-25f), 0x0002);  // tie -> even (up)
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(NAN))));
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(HalfToFloat(0x8400), -0x1p-14f);
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_TRUE(std::isinf(HalfToFloat(0xfc00)));
  // Every finite half survives a round trip through fp32 exactly.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToHalf(f), h) << h;
  }
}

TEST(GradientCodecTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBf16(1.0f + 0x1p-8f), 0x3f80);      // tie -> even
  EXPECT_EQ(FloatToBf16(1.0f + 3 * 0x1p-8f), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(FloatToBf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  EXPECT_EQ(FloatToBf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7f80);  // inf
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(NAN))));
  // A NaN whose payload sits only in the low bits stays NaN.
  EXPECT_TRUE(std::isnan(
      Bf16ToFloat(FloatToBf16(std::bit_cast<float>(uint32_t{0x7f800001})))));
  EXPECT_EQ(Bf16ToFloat(0x3f80), 1.0f);
}

TEST(GradientCodecTest, RoundTripsEverySizeWithinTheEncodingsError) {
  for (GradientEncoding e : kAll) {
    for (int64_t n : {0, 1, 2, 3, 7, 13, 31, 1009}) {
      SCOPED_TRACE(::testing::Message()
                   << "encoding " << static_cast<int>(e) << " n " << n);
      const std::vector<float> v = RandomValues(n, 7 + n);
      std::string bytes;
      Encode(e, v.data(), n, /*ratio=*/0.1, &bytes);
      ASSERT_EQ(static_cast<int64_t>(bytes.size()), EncodedBytes(e, n, 0.1));
      std::vector<float> out(n, 99.0f);
      ASSERT_TRUE(Decode(e, bytes, n, out.data()).ok());
      if (e == GradientEncoding::kTopK) {
        int64_t kept = 0;
        for (int64_t i = 0; i < n; ++i) {
          if (out[i] != 0.0f) {
            ++kept;
            EXPECT_EQ(out[i], v[i]);
          }
        }
        EXPECT_EQ(kept, TopKCount(n, 0.1));
        continue;
      }
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_NEAR(out[i], v[i], Tolerance(e) * std::fabs(v[i]) + 1e-30);
        EXPECT_EQ(out[i], RoundTrip(e, v[i]));
      }
      // kAdd adds the same values.
      std::vector<float> acc(n, 1.0f);
      ASSERT_TRUE(Decode(e, bytes, n, acc.data(), DecodeOp::kAdd).ok());
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(acc[i], 1.0f + out[i]);
    }
  }
}

TEST(GradientCodecTest, SizesAndTopKCount) {
  EXPECT_EQ(TopKCount(0, 0.01), 0);
  EXPECT_EQ(TopKCount(1, 0.01), 1);
  EXPECT_EQ(TopKCount(100, 0.01), 1);
  EXPECT_EQ(TopKCount(101, 0.01), 2);  // ceil
  EXPECT_EQ(TopKCount(7, 1.0), 7);
  EXPECT_EQ(EncodedBytes(GradientEncoding::kFp32, 5, 0), 20);
  EXPECT_EQ(EncodedBytes(GradientEncoding::kFp16, 5, 0), 10);
  EXPECT_EQ(EncodedBytes(GradientEncoding::kBf16, 5, 0), 10);
  EXPECT_EQ(EncodedBytes(GradientEncoding::kTopK, 1000, 0.01), 80);
}

TEST(GradientCodecTest, TopKKeepsTheLargestMagnitudes) {
  const std::vector<float> v = {0.1f, -5.0f, 0.3f, 4.0f, -0.2f, 3.0f, 0.0f};
  std::string bytes;
  Encode(GradientEncoding::kTopK, v.data(), 7, 3.0 / 7, &bytes);
  ASSERT_EQ(bytes.size(), 24u);
  std::vector<float> out(7);
  ASSERT_TRUE(Decode(GradientEncoding::kTopK, bytes, 7, out.data()).ok());
  EXPECT_EQ(out, (std::vector<float>{0, -5.0f, 0, 4.0f, 0, 3.0f, 0}));
  // NaN counts as the largest: it is sent (and the shard can refuse it).
  const std::vector<float> w = {1.0f, NAN, 2.0f};
  bytes.clear();
  Encode(GradientEncoding::kTopK, w.data(), 3, 0.1, &bytes);
  ASSERT_TRUE(Decode(GradientEncoding::kTopK, bytes, 3, out.data()).ok());
  EXPECT_TRUE(std::isnan(out[1]));
}

TEST(GradientCodecTest, ErrorFeedbackCarriesWhatWasDropped) {
  // Top-k of 1 of 4: sent + residual == sum of the gradients at every step,
  // and within a few steps every element has been delivered.
  const std::vector<float> g = {1.0f, 0.9f, 0.8f, 0.7f};
  ErrorFeedback ef(4);
  std::vector<float> delivered(4, 0.0f);
  for (int step = 0; step < 8; ++step) {
    std::string bytes;
    ef.Encode(GradientEncoding::kTopK, 0, g.data(), 4, 0.25, &bytes);
    ASSERT_TRUE(Decode(GradientEncoding::kTopK, bytes, 4, delivered.data(),
                       DecodeOp::kAdd)
                    .ok());
    for (int i = 0; i < 4; ++i) {
      EXPECT_NEAR(delivered[i] + ef.residual()[i], g[i] * (step + 1), 1e-5);
    }
  }
  for (int i = 0; i < 4; ++i) EXPECT_GT(delivered[i], 0.0f) << i;

  // fp16: a value below the rounding step is lost without feedback and
  // delivered with it.
  const float tiny = 1.0f + 0x1p-13f;  // rounds to 1.0 in fp16
  ErrorFeedback ef16(1);
  float sum_with = 0, sum_without = 0;
  for (int step = 0; step < 64; ++step) {
    std::string with, without;
    ef16.Encode(GradientEncoding::kFp16, 0, &tiny, 1, 0, &with);
    Encode(GradientEncoding::kFp16, &tiny, 1, 0, &without);
    float a = 0, b = 0;
    ASSERT_TRUE(Decode(GradientEncoding::kFp16, with, 1, &a).ok());
    ASSERT_TRUE(Decode(GradientEncoding::kFp16, without, 1, &b).ok());
    sum_with += a;
    sum_without += b;
  }
  EXPECT_EQ(sum_without, 64.0f);
  EXPECT_NEAR(sum_with, 64 * tiny, 2 * 0x1p-10f);
  EXPECT_LE(std::fabs(ef16.residual()[0]), 0x1p-10f);
  // Offsets address the flat buffer.
  ErrorFeedback flat(10);
  std::string bytes;
  flat.Encode(GradientEncoding::kBf16, 6, &tiny, 1, 0, &bytes);
  EXPECT_EQ(flat.residual()[5], 0.0f);
  EXPECT_NE(flat.residual()[6], 0.0f);
  EXPECT_GT(flat.L1(), 0);
}

TEST(GradientCodecTest, OverflowLeavesNoInfiniteResidual) {
  const float big = 1e6f;
  ErrorFeedback ef(1);
  std::string bytes;
  ef.Encode(GradientEncoding::kFp16, 0, &big, 1, 0, &bytes);
  EXPECT_EQ(ef.residual()[0], 0.0f);
}

TEST(GradientCodecTest, MalformedInputIsRejected) {
  std::vector<float> out(4, 7.0f);
  EXPECT_EQ(
      Decode(GradientEncoding::kFp16, std::string(7, 0), 4, out.data()).code(),
      absl::StatusCode::kDataLoss);
  EXPECT_EQ(
      Decode(GradientEncoding::kFp32, std::string(8, 0), 4, out.data()).code(),
      absl::StatusCode::kDataLoss);
  EXPECT_EQ(Decode(static_cast<GradientEncoding>(9), "", 0, out.data()).code(),
            absl::StatusCode::kInvalidArgument);
  auto topk = [](std::vector<uint32_t> idx) {
    std::string s(reinterpret_cast<const char*>(idx.data()), 4 * idx.size());
    s.append(4 * idx.size(), '\0');
    return s;
  };
  EXPECT_EQ(Decode(GradientEncoding::kTopK, topk({4}), 4, out.data()).code(),
            absl::StatusCode::kDataLoss);  // index out of range
  EXPECT_EQ(Decode(GradientEncoding::kTopK, topk({1, 1}), 4, out.data()).code(),
            absl::StatusCode::kDataLoss);  // duplicate
  EXPECT_EQ(Decode(GradientEncoding::kTopK, topk({2, 1}), 4, out.data()).code(),
            absl::StatusCode::kDataLoss);  // not increasing
  EXPECT_EQ(Decode(GradientEncoding::kTopK, "", 4, out.data()).code(),
            absl::StatusCode::kDataLoss);  // k == 0
  EXPECT_EQ(
      Decode(GradientEncoding::kTopK, std::string(12, 0), 4, out.data()).code(),
      absl::StatusCode::kDataLoss);             // not 8k
  EXPECT_EQ(out, std::vector<float>(4, 7.0f));  // untouched
  EXPECT_TRUE(
      Decode(GradientEncoding::kTopK, topk({0, 3}), 4, out.data()).ok());
}

// An all-zero chunk travels as kZeros: no bytes, decoded as zeros (or
// nothing added), a payload refused, and no job can choose it.
TEST(GradientCodecTest, ZerosCarryNoBytes) {
  std::string wire = "x";
  const std::vector<float> zeros(5, 0.0f);
  Encode(GradientEncoding::kZeros, zeros.data(), 5, 0.0, &wire);
  EXPECT_EQ(wire, "x");
  EXPECT_EQ(EncodedBytes(GradientEncoding::kZeros, 5, 0.0), 0);
  std::vector<float> out(5, 7.0f);
  ASSERT_TRUE(
      Decode(GradientEncoding::kZeros, "", 5, out.data(), DecodeOp::kAdd).ok());
  EXPECT_EQ(out, std::vector<float>(5, 7.0f));
  ASSERT_TRUE(Decode(GradientEncoding::kZeros, "", 5, out.data()).ok());
  EXPECT_EQ(out, zeros);
  out.assign(5, 7.0f);
  EXPECT_EQ(Decode(GradientEncoding::kZeros, "ab", 5, out.data()).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(out, std::vector<float>(5, 7.0f));
  GradientCompression c;
  c.encoding = GradientEncoding::kZeros;
  EXPECT_FALSE(ValidateCompression(c).ok());
}

TEST(GradientCodecTest, ParsesCompressionFlags) {
  auto c = ParseCompression("topk:0.01", true);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->encoding, GradientEncoding::kTopK);
  EXPECT_DOUBLE_EQ(c->topk_ratio, 0.01);
  EXPECT_TRUE(c->uses_feedback());
  EXPECT_EQ(CompressionName(*c), "topk:0.01");
  EXPECT_EQ(ParseCompression("fp16", false)->encoding, GradientEncoding::kFp16);
  EXPECT_EQ(ParseCompression("bf16", true)->encoding, GradientEncoding::kBf16);
  EXPECT_FALSE(ParseCompression("none", true)->uses_feedback());
  EXPECT_FALSE(ParseCompression("topk:0", true).ok());
  EXPECT_FALSE(ParseCompression("topk:1.5", true).ok());
  EXPECT_FALSE(ParseCompression("topk:x", true).ok());
  EXPECT_FALSE(ParseCompression("int8", true).ok());
  EXPECT_FALSE(ValidateCompression({GradientEncoding::kTopK, 0.0, true}).ok());
  EXPECT_TRUE(ValidateCompression({GradientEncoding::kFp16, 0.0, true}).ok());
}

}  // namespace
}  // namespace ferry

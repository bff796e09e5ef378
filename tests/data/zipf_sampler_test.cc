// Rejection-inversion Zipf: the frequencies follow k^-s, ranks stay in
// [1, n], draws are a pure function of the stream.
#include "data/zipf_sampler.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

// Observed frequencies of 200k draws against P(k) = k^-s / H(n, s), within
// 4 standard deviations of a binomial count.
void ExpectZipf(int64_t n, double s) {
  auto sampler = ZipfSampler::Create(n, s);
  ASSERT_TRUE(sampler.ok()) << sampler.status();
  constexpr int kDraws = 200000;
  std::vector<int64_t> counts(static_cast<size_t>(n) + 1, 0);
  CounterRng rng(42, 7);
  for (int i = 0; i < kDraws; ++i) {
    const int64_t k = sampler->Sample(rng);
    ASSERT_GE(k, 1);
    ASSERT_LE(k, n);
    ++counts[static_cast<size_t>(k)];
  }
  double norm = 0;
  for (int64_t k = 1; k <= n; ++k) norm += std::pow(double(k), -s);
  for (int64_t k = 1; k <= std::min<int64_t>(n, 20); ++k) {
    const double p = std::pow(double(k), -s) / norm;
    const double sd = std::sqrt(kDraws * p * (1 - p));
    EXPECT_NEAR(counts[k], kDraws * p, 4 * sd + 1)
        << "n " << n << " s " << s << " k " << k;
  }
}

TEST(ZipfSamplerTest, FrequenciesFollowThePowerLaw) {
  ExpectZipf(1, 1.1);
  ExpectZipf(2, 1.1);
  ExpectZipf(10, 0.5);
  ExpectZipf(1000, 1.0);  // the exponent 1 case
  ExpectZipf(100000, 1.1);
  ExpectZipf(50, 2.5);
}

TEST(ZipfSamplerTest, HugeVocabulariesStayInRange) {
  auto sampler = ZipfSampler::Create(int64_t{1} << 32, 1.05);
  ASSERT_TRUE(sampler.ok());
  CounterRng rng(1, 2);
  int64_t beyond_million = 0;
  for (int i = 0; i < 100000; ++i) {
    const int64_t k = sampler->Sample(rng);
    ASSERT_GE(k, 1);
    ASSERT_LE(k, int64_t{1} << 32);
    beyond_million += k > 1000000;
  }
  EXPECT_GT(beyond_million, 0);  // the tail is reached
}

TEST(ZipfSamplerTest, SameStreamSameDrawsAndBadArgumentsRefused) {
  auto sampler = ZipfSampler::Create(1000, 1.2);
  ASSERT_TRUE(sampler.ok());
  CounterRng a(5, 9), b(5, 9), c(5, 10);
  int differ = 0;
  for (int i = 0; i < 100; ++i) {
    const int64_t x = sampler->Sample(a);
    EXPECT_EQ(x, sampler->Sample(b));
    differ += x != sampler->Sample(c);
  }
  EXPECT_GT(differ, 10);
  EXPECT_FALSE(ZipfSampler::Create(0, 1.1).ok());
  EXPECT_FALSE(ZipfSampler::Create(10, 0).ok());
  EXPECT_FALSE(ZipfSampler::Create(10, std::nan("")).ok());
  EXPECT_FALSE(ZipfSampler::Create(10, INFINITY).ok());
}

TEST(CounterRngTest, UniformAndNormalMoments) {
  CounterRng rng(3, 4);
  double sum = 0, sum2 = 0, usum = 0;
  constexpr int kN = 100000;
  for (int i = 0; i < kN; ++i) {
    const double u = rng.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    usum += u;
    const double z = rng.Normal();
    sum += z;
    sum2 += z * z;
  }
  EXPECT_NEAR(usum / kN, 0.5, 0.01);
  EXPECT_NEAR(sum / kN, 0.0, 0.02);
  EXPECT_NEAR(sum2 / kN, 1.0, 0.03);
}

}  // namespace
}  // namespace ferry

#include "compute/cpu_backend.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/random_values.h"

namespace ferry {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  return testing::RandomValues(n, seed);
}

// Naive row-major reference for C = alpha op(A) op(B) + beta C.
void NaiveGemm(bool ta, bool tb, int m, int n, int k, float alpha,
               const std::vector<float>& a, const std::vector<float>& b,
               float beta, std::vector<float>& c) {
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int p = 0; p < k; ++p) {
        const float av = ta ? a[p * m + i] : a[i * k + p];
        const float bv = tb ? b[j * k + p] : b[p * n + j];
        sum += static_cast<double>(av) * bv;
      }
      c[i * n + j] = static_cast<float>(alpha * sum + beta * c[i * n + j]);
    }
  }
}

TEST(CpuBackendTest, GemmMatchesNaiveForAllTransposes) {
  auto backend = MakeCpuBackend(1);
  const int m = 33, n = 17, k = 65;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const auto a = Random(m * k, 1), b = Random(k * n, 2);
      auto expected = Random(m * n, 3);
      auto actual = expected;
      NaiveGemm(ta, tb, m, n, k, 0.5f, a, b, 0.25f, expected);
      ASSERT_TRUE(backend
                      ->Gemm(ta ? Transpose::kYes : Transpose::kNo,
                             tb ? Transpose::kYes : Transpose::kNo, m, n, k,
                             0.5f, a.data(), ta ? m : k, b.data(), tb ? k : n,
                             0.25f, actual.data(), n)
                      .ok());
      for (int i = 0; i < m * n; ++i) EXPECT_NEAR(actual[i], expected[i], 1e-4);
    }
  }
}

TEST(CpuBackendTest, SoftmaxCrossEntropyLossGradientAndAccuracy) {
  auto backend = MakeCpuBackend(1);
  // Row 0 strongly predicts class 2 (its label); row 1 is uniform.
  const std::vector<float> logits = {0, 0, 10, 1, 1, 1};
  const std::vector<int32_t> labels = {2, 0};
  std::vector<float> d(6);
  auto stats = backend->SoftmaxCrossEntropy(2, 3, logits.data(), labels.data(),
                                            0.5f, d.data());
  ASSERT_TRUE(stats.ok());
  const double row0 = std::log(2 + std::exp(10.0)) - 10.0;
  EXPECT_NEAR(stats->loss_sum, row0 + std::log(3.0), 1e-6);
  EXPECT_EQ(stats->correct, 2);  // uniform row: argmax is the first class
  EXPECT_NEAR(d[3], 0.5 * (1.0 / 3 - 1), 1e-6);
  EXPECT_NEAR(d[4], 0.5 / 3, 1e-6);
  double row_sum = d[0] + d[1] + d[2];
  EXPECT_NEAR(row_sum, 0.0, 1e-6);
}

TEST(CpuBackendTest, SoftmaxRejectsLabelOutOfRangeAndWritesNothing) {
  auto backend = MakeCpuBackend(1);
  const std::vector<float> logits = {0, 1};
  const std::vector<int32_t> labels = {5};
  std::vector<float> d = {42, 42};
  auto stats = backend->SoftmaxCrossEntropy(1, 2, logits.data(), labels.data(),
                                            1.0f, d.data());
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(d[0], 42);
}

TEST(CpuBackendTest, ElementwiseKernels) {
  auto backend = MakeCpuBackend(1);
  std::vector<float> x = {-1, 2, -3, 4};
  std::vector<float> y(4);
  ASSERT_TRUE(backend->Relu(4, x.data(), y.data()).ok());
  EXPECT_EQ(y, (std::vector<float>{0, 2, 0, 4}));
  std::vector<float> dx(4);
  const std::vector<float> dy = {1, 1, 1, 1};
  ASSERT_TRUE(backend->ReluBackward(4, y.data(), dy.data(), dx.data()).ok());
  EXPECT_EQ(dx, (std::vector<float>{0, 1, 0, 1}));
  std::vector<float> m = {1, 2, 3, 4, 5, 6};
  const std::vector<float> bias = {10, 20, 30};
  ASSERT_TRUE(backend->AddBias(2, 3, bias.data(), m.data()).ok());
  EXPECT_EQ(m, (std::vector<float>{11, 22, 33, 14, 25, 36}));
  std::vector<float> db(3);
  ASSERT_TRUE(backend->BiasGrad(2, 3, m.data(), db.data()).ok());
  EXPECT_EQ(db, (std::vector<float>{25, 47, 69}));
  ASSERT_TRUE(backend->Axpy(4, 2.0f, dy.data(), x.data()).ok());
  EXPECT_EQ(x, (std::vector<float>{1, 4, -1, 6}));
  EXPECT_DOUBLE_EQ(*backend->SumSquares(4, x.data()), 1 + 16 + 1 + 36);
  EXPECT_TRUE(*backend->AllFinite(4, x.data()));
  x[2] = std::nanf("");
  EXPECT_FALSE(*backend->AllFinite(4, x.data()));
}

TEST(BackendFactoryTest, ParsesChoicesAndFallsBackToCpu) {
  EXPECT_FALSE(ParseDeviceChoice("tpu").ok());
  auto backend = MakeBackend(DeviceChoice::kCpu, 1);
  ASSERT_TRUE(backend.ok());
  EXPECT_EQ((*backend)->Kind(), "cpu");
  auto automatic = MakeBackend(DeviceChoice::kAuto, 1);
  ASSERT_TRUE(automatic.ok());
  EXPECT_EQ((*automatic)->Kind(), CudaDeviceAvailable() ? "cuda" : "cpu");
  if (!CudaDeviceAvailable()) {
    EXPECT_EQ(MakeBackend(DeviceChoice::kCuda, 1).status().code(),
              absl::StatusCode::kUnavailable);
  }
}

}  // namespace
}  // namespace ferry

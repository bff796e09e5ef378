#include "model/mlp.h"

#include <cmath>
#include <random>
#include <vector>

#include "compute/cpu_backend.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

TEST(MlpSpecTest, ParsesAndRejects) {
  EXPECT_EQ(*ParseMlpSpec("784-256-10"), (std::vector<int>{784, 256, 10}));
  EXPECT_FALSE(ParseMlpSpec("784").ok());
  EXPECT_FALSE(ParseMlpSpec("784-0-10").ok());
  EXPECT_FALSE(ParseMlpSpec("784-x-10").ok());
  EXPECT_FALSE(ParseMlpSpec("").ok());
}

TEST(MlpTest, LayoutNamesAndSizes) {
  auto backend = MakeCpuBackend(1);
  auto mlp = Mlp::Create({784, 256, 128, 10}, backend.get());
  ASSERT_TRUE(mlp.ok());
  const auto& tensors = mlp->layout().tensors();
  ASSERT_EQ(tensors.size(), 6u);
  EXPECT_EQ(tensors[0].name, "fc0.weight");
  EXPECT_EQ(tensors[0].shape, (std::vector<int64_t>{256, 784}));
  EXPECT_EQ(tensors[5].name, "fc2.bias");
  EXPECT_EQ(mlp->layout().total_elements(), 235146);
}

TEST(MlpTest, InitIsDeterministicPerSeedAndScaled) {
  auto backend = MakeCpuBackend(1);
  auto mlp = Mlp::Create({100, 50, 10}, backend.get());
  ASSERT_TRUE(mlp.ok());
  const auto a = mlp->InitialParameters(7), b = mlp->InitialParameters(7),
             c = mlp->InitialParameters(8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  double sq = 0;
  for (int i = 0; i < 5000; ++i) sq += a[i] * a[i];
  EXPECT_NEAR(sq / 5000, 2.0 / 100, 0.004);  // He: var = 2 / fan_in
}

// Analytical gradients against central finite differences (in double-checked
// float: a small model and a loose-enough step keep fp32 error low).
TEST(MlpTest, GradientMatchesFiniteDifferences) {
  auto backend = MakeCpuBackend(1);
  auto mlp = Mlp::Create({5, 4, 3}, backend.get());
  ASSERT_TRUE(mlp.ok());
  std::vector<float> params = mlp->InitialParameters(3);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (float& p : params) p += 0.1f * dist(rng);  // non-zero biases too
  const int batch = 6;
  std::vector<float> x(batch * 5);
  for (float& v : x) v = dist(rng);
  const std::vector<int32_t> labels = {0, 1, 2, 2, 1, 0};
  std::vector<float> grads(params.size());
  std::vector<std::pair<int64_t, int64_t>> ready;
  auto stats =
      mlp->ForwardBackward(params.data(), x.data(), labels.data(), batch, 1.0f,
                           grads.data(), [&](int64_t off, int64_t len) {
                             ready.push_back({off, len});
                           });
  ASSERT_TRUE(stats.ok());
  // Ranges arrive last layer first and cover the whole buffer.
  ASSERT_EQ(ready.size(), 2u);
  EXPECT_EQ(ready[0].first, 24);
  EXPECT_EQ(ready[0].second, 15);
  EXPECT_EQ(ready[1].first, 0);
  EXPECT_EQ(ready[1].second, 24);

  const float h = 1e-3f;  // small enough not to cross a ReLU kink
  for (size_t i = 0; i < params.size(); ++i) {
    std::vector<float> plus = params, minus = params;
    plus[i] += h;
    minus[i] -= h;
    const double lp =
        mlp->Evaluate(plus.data(), x.data(), labels.data(), batch)->loss_sum;
    const double lm =
        mlp->Evaluate(minus.data(), x.data(), labels.data(), batch)->loss_sum;
    const double numeric = (lp - lm) / (2 * h);
    EXPECT_NEAR(grads[i], numeric, 2e-3 + 1e-2 * std::abs(numeric))
        << "param " << i;
  }
}

TEST(MlpTest, RejectsBadBatchAndLabels) {
  auto backend = MakeCpuBackend(1);
  auto mlp = Mlp::Create({2, 3}, backend.get());
  ASSERT_TRUE(mlp.ok());
  auto params = mlp->InitialParameters(1);
  std::vector<float> x = {1, 2}, grads(params.size());
  const std::vector<int32_t> bad = {3};
  EXPECT_EQ(mlp->ForwardBackward(params.data(), x.data(), bad.data(), 1, 1,
                                 grads.data())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(mlp->Evaluate(params.data(), x.data(), bad.data(), 0).ok());
}

}  // namespace
}  // namespace ferry

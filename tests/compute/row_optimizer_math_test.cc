#include "compute/row_optimizer_math.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

RowOptimizerParams Params(RowOptimizerKind kind) {
  RowOptimizerParams p;
  p.kind = kind;
  p.lr = 0.1f;
  p.beta = 1.0f;
  return p;
}

TEST(RowOptimizerMath, StateSizes) {
  EXPECT_EQ(RowStateFloats(RowOptimizerKind::kSgd, 16), 0);
  EXPECT_EQ(RowStateFloats(RowOptimizerKind::kAdagrad, 16), 1);
  EXPECT_EQ(RowStateFloats(RowOptimizerKind::kFtrl, 16), 32);
}

TEST(RowOptimizerMath, SgdSubtractsLrTimesGradient) {
  std::vector<float> row = {1.0f, -2.0f, 0.5f};
  const std::vector<float> g = {0.5f, -1.0f, 0.0f};
  ApplyRowUpdate(row.data(), g.data(), 3, Params(RowOptimizerKind::kSgd));
  EXPECT_FLOAT_EQ(row[0], 0.95f);
  EXPECT_FLOAT_EQ(row[1], -1.9f);
  EXPECT_FLOAT_EQ(row[2], 0.5f);
}

TEST(RowOptimizerMath, RowwiseAdagradSharesOneAccumulator) {
  RowOptimizerParams p = Params(RowOptimizerKind::kAdagrad);
  p.epsilon = 0.0f;
  std::vector<float> row = {1.0f, 1.0f, 0.1f};  // two values, accumulator 0.1
  const std::vector<float> g = {3.0f, 4.0f};
  ApplyRowUpdate(row.data(), g.data(), 2, p);
  const double acc = 0.1 + (9.0 + 16.0) / 2.0;
  EXPECT_FLOAT_EQ(row[2], static_cast<float>(acc));
  EXPECT_NEAR(row[0], 1.0 - 0.1 * 3.0 / std::sqrt(acc), 1e-6);
  EXPECT_NEAR(row[1], 1.0 - 0.1 * 4.0 / std::sqrt(acc), 1e-6);
  // A second step sees the grown accumulator: smaller steps.
  const float before = row[0];
  ApplyRowUpdate(row.data(), g.data(), 2, p);
  EXPECT_LT(before - row[0], 0.1 * 3.0 / std::sqrt(acc));
}

// McMahan et al. 2013, Algorithm 1, per coordinate, in double.
struct FtrlReference {
  double alpha, beta, l1, l2, z = 0, n = 0;
  double Weight() const {
    if (std::fabs(z) <= l1) return 0.0;
    return -(z - (z > 0 ? l1 : -l1)) / ((beta + std::sqrt(n)) / alpha + l2);
  }
  void Step(double g) {
    const double w = Weight();
    const double sigma = (std::sqrt(n + g * g) - std::sqrt(n)) / alpha;
    z += g - sigma * w;
    n += g * g;
  }
};

TEST(RowOptimizerMath, FtrlMatchesTheReference) {
  RowOptimizerParams p = Params(RowOptimizerKind::kFtrl);
  p.l1 = 0.05f;
  p.l2 = 0.01f;
  p.beta = 0.5f;
  const int dim = 2;
  std::vector<float> row(3 * dim, 0.0f);  // w, z, n
  FtrlReference ref[dim] = {{0.1, 0.5, 0.05, 0.01}, {0.1, 0.5, 0.05, 0.01}};
  const float grads[][dim] = {{0.3f, -0.01f},
                              {0.2f, 0.02f},
                              {-0.5f, 0.0f},
                              {0.4f, 0.01f},
                              {0.1f, -0.02f}};
  for (const auto& g : grads) {
    ApplyRowUpdate(row.data(), g, dim, p);
    for (int i = 0; i < dim; ++i) {
      ref[i].Step(g[i]);
      EXPECT_NEAR(row[i], ref[i].Weight(), 1e-5);
      EXPECT_NEAR(row[dim + i], ref[i].z, 1e-5);
      EXPECT_NEAR(row[2 * dim + i], ref[i].n, 1e-5);
    }
  }
  // l1 keeps a coordinate with small accumulated gradient at exactly zero.
  EXPECT_EQ(row[1], 0.0f);
  EXPECT_NE(row[0], 0.0f);
}

TEST(RowOptimizerMath, FtrlRowStartsAtItsInitialValues) {
  RowOptimizerParams p = Params(RowOptimizerKind::kFtrl);
  p.l2 = 0.3f;
  const int dim = 4;
  std::vector<float> row(3 * dim);
  InitRow(row.data(), 7, 2, 12345, dim, 0.25f, p);
  for (int i = 0; i < dim; ++i) {
    EXPECT_EQ(row[i], InitialRowValue(7, 2, 12345, i, 0.25f));
    EXPECT_NEAR(FtrlWeight(row[dim + i], row[2 * dim + i], p), row[i], 1e-6);
    EXPECT_EQ(row[2 * dim + i], 0.0f);
  }
  // With l1 the closed form cannot reproduce every value: rows start at 0.
  p.l1 = 0.01f;
  InitRow(row.data(), 7, 2, 12345, dim, 0.25f, p);
  for (int i = 0; i < dim; ++i) EXPECT_EQ(row[i], 0.0f);
}

TEST(RowOptimizerMath, AdagradRowStartsWithTheInitialAccumulator) {
  RowOptimizerParams p = Params(RowOptimizerKind::kAdagrad);
  p.initial_accumulator = 0.1f;
  std::vector<float> row(3);
  InitRow(row.data(), 1, 0, 5, 2, 0.5f, p);
  EXPECT_EQ(row[2], 0.1f);
  EXPECT_EQ(row[0], InitialRowValue(1, 0, 5, 0, 0.5f));
}

TEST(RowOptimizerMath, InitialValuesArePureUniformAndKeyed) {
  const float scale = 0.5f;
  double sum = 0, sum_sq = 0;
  const int n = 20000;
  for (int id = 0; id < n; ++id) {
    const float v = InitialRowValue(42, 3, static_cast<uint64_t>(id), 0, scale);
    EXPECT_EQ(v, InitialRowValue(42, 3, static_cast<uint64_t>(id), 0, scale));
    ASSERT_GE(v, -scale);
    ASSERT_LT(v, scale);
    sum += v;
    sum_sq += v * v;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sum_sq / n, scale * scale / 3.0, 0.005);
  // Every key part matters.
  const float base = InitialRowValue(42, 3, 99, 1, scale);
  EXPECT_NE(base, InitialRowValue(43, 3, 99, 1, scale));
  EXPECT_NE(base, InitialRowValue(42, 4, 99, 1, scale));
  EXPECT_NE(base, InitialRowValue(42, 3, 98, 1, scale));
  EXPECT_NE(base, InitialRowValue(42, 3, 99, 2, scale));
}

}  // namespace
}  // namespace ferry

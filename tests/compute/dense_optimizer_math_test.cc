// The dense optimizers' per-element math (compute/dense_optimizer_math.h),
// which the CPU backend's loops and the CUDA kernels call: against the
// textbook formulas in double, and the CPU backend's vectorized loops
// against the element functions bit for bit.
#include "compute/dense_optimizer_math.h"

#include <cmath>
#include <cstddef>
#include <vector>

#include "compute/compute_backend.h"
#include "compute/cpu_backend.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

TEST(DenseOptimizerMath, SgdAndMomentumFollowTheirFormulas) {
  EXPECT_FLOAT_EQ(SgdElement(0.1f, 0.01f, 2.0f, 3.0f),
                  3.0f - 0.1f * (2.0f + 0.01f * 3.0f));
  for (const bool nesterov : {false, true}) {
    float velocity = 0.5f, param = 3.0f;
    MomentumElement(0.1f, 0.01f, 0.9f, nesterov, 2.0f, velocity, param);
    const double g = 2.0 + 0.01 * 3.0;
    const double v = 0.9 * 0.5 + g;
    EXPECT_NEAR(velocity, v, 1e-6);
    EXPECT_NEAR(param, 3.0 - 0.1 * (nesterov ? g + 0.9 * v : v), 1e-6)
        << nesterov;
  }
}

TEST(DenseOptimizerMath, AdamAndAdamWFollowTheirFormulas) {
  OptimizerStepParams p;
  p.lr = 0.01f;
  p.weight_decay = 0.1f;
  p.step = 3;
  for (const bool decoupled : {false, true}) {
    auto s = AdamScalarsOf(p, decoupled);
    ASSERT_TRUE(s.ok()) << s.status();
    float m = 0.2f, v = 0.05f, param = 1.5f;
    AdamElement(*s, 0.7f, m, v, param);
    double w = 1.5, g = 0.7;
    if (decoupled) {
      w -= 0.01 * 0.1 * w;
    } else {
      g += 0.1 * w;
    }
    const double mm = 0.9 * 0.2 + 0.1 * g;
    const double vv = 0.999 * 0.05 + 0.001 * g * g;
    const double m_hat = mm / (1 - std::pow(0.9, 3));
    const double v_hat = vv / (1 - std::pow(0.999, 3));
    EXPECT_NEAR(m, mm, 1e-6) << decoupled;
    EXPECT_NEAR(v, vv, 1e-6) << decoupled;
    EXPECT_NEAR(param, w - 0.01 * m_hat / (std::sqrt(v_hat) + 1e-8), 1e-6)
        << decoupled;
  }
  p.step = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(AdamScalarsOf(p, false).status()));
}

// An odd length (a vector main loop and a remainder), varied values: the
// backend's loops give exactly what the element functions give.
TEST(DenseOptimizerMath, TheCpuBackendsLoopsAreTheElementFunctions) {
  constexpr size_t kN = 1037;
  std::vector<float> grad(kN), param(kN), state(kN), second(kN);
  for (size_t i = 0; i < kN; ++i) {
    grad[i] = std::sin(0.37f * static_cast<float>(i)) * 0.5f;
    param[i] = std::cos(0.11f * static_cast<float>(i));
    state[i] = 0.01f * static_cast<float>(i % 17) - 0.05f;
    second[i] = 0.001f * static_cast<float>(i % 13);
  }
  auto backend = MakeCpuBackend(1);
  OptimizerStepParams p;
  p.lr = 0.05f;
  p.weight_decay = 5e-4f;
  p.step = 7;

  std::vector<float> w = param;
  ASSERT_TRUE(backend->SgdUpdate(kN, p, grad.data(), w.data()).ok());
  for (size_t i = 0; i < kN; ++i) {
    ASSERT_EQ(w[i], SgdElement(p.lr, p.weight_decay, grad[i], param[i])) << i;
  }
  for (const bool nesterov : {false, true}) {
    p.nesterov = nesterov;
    std::vector<float> vel = state;
    w = param;
    ASSERT_TRUE(
        backend->MomentumUpdate(kN, p, grad.data(), vel.data(), w.data()).ok());
    for (size_t i = 0; i < kN; ++i) {
      float v = state[i], x = param[i];
      MomentumElement(p.lr, p.weight_decay, p.momentum, nesterov, grad[i], v,
                      x);
      ASSERT_EQ(vel[i], v) << i;
      ASSERT_EQ(w[i], x) << i;
    }
  }
  for (const bool decoupled : {false, true}) {
    std::vector<float> m = state, v = second;
    w = param;
    ASSERT_TRUE(backend
                    ->AdamUpdate(kN, p, decoupled, grad.data(), m.data(),
                                 v.data(), w.data())
                    .ok());
    const AdamScalars s = *AdamScalarsOf(p, decoupled);
    for (size_t i = 0; i < kN; ++i) {
      float mi = state[i], vi = second[i], x = param[i];
      AdamElement(s, grad[i], mi, vi, x);
      ASSERT_EQ(m[i], mi) << i;
      ASSERT_EQ(v[i], vi) << i;
      ASSERT_EQ(w[i], x) << i;
    }
  }
}

}  // namespace
}  // namespace ferry

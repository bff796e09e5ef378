// The dense optimizers' per-element math (compute/dense_optimizer_math.h),
// which the CPU loops and the CUDA kernels call: against the textbook
// formulas in double, the registry (compute/dense_optimizers.h), and the
// registered CPU loops (vectorized) against the element functions bit for
// bit.
#include "compute/dense_optimizer_math.h"

#include <cmath>
#include <cstddef>
#include <vector>

#include "compute/compute_backend.h"
#include "compute/cpu_backend.h"
#include "compute/dense_optimizers.h"
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
    const AdamScalars s = AdamScalarsOf(p, decoupled);
    float m = 0.2f, v = 0.05f, param = 1.5f;
    AdamElement(s, 0.7f, m, v, param);
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
}

// The registry holds one entry per optimizer kind, each with its CPU loop
// and, in a CUDA build, its CUDA launch.
TEST(DenseOptimizers, EveryKindIsRegisteredOnce) {
  for (const OptimizerKind kind :
       {OptimizerKind::kSgd, OptimizerKind::kMomentum, OptimizerKind::kAdam,
        OptimizerKind::kAdamW}) {
    absl::StatusOr<const DenseOptimizer*> found = FindDenseOptimizer(kind);
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ((*found)->kind, kind);
    EXPECT_NE((*found)->cpu, nullptr);
#if FERRY_HAVE_CUDA
    EXPECT_NE((*found)->cuda, nullptr);
#endif
    EXPECT_LE(OptimizerStateBuffers(kind), kMaxDenseOptimizerState);
  }
  EXPECT_EQ(DenseOptimizers().size(), 4u);
}

// A step below 1 is refused before anything is written; an empty update
// writes nothing.
TEST(DenseOptimizers, RunDenseUpdateChecksTheStep) {
  auto backend = MakeCpuBackend(1);
  const DenseOptimizer* adam = *FindDenseOptimizer(OptimizerKind::kAdam);
  std::vector<float> grad = {1.0f}, m = {0.0f}, v = {0.0f}, w = {2.0f};
  DenseUpdateArgs args;
  args.n = 1;
  args.grad = grad.data();
  args.state[0] = m.data();
  args.state[1] = v.data();
  args.param = w.data();
  OptimizerStepParams p;
  p.step = 0;
  EXPECT_TRUE(
      absl::IsInvalidArgument(RunDenseUpdate(*backend, *adam, p, args)));
  EXPECT_EQ(w[0], 2.0f);
  p.step = 1;
  args.n = 0;
  ASSERT_TRUE(RunDenseUpdate(*backend, *adam, p, args).ok());
  EXPECT_EQ(w[0], 2.0f);
}

// An odd length (a vector main loop and a remainder), varied values: the
// registered CPU loops give exactly what the element functions give.
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

  auto run = [&](OptimizerKind kind, float* state0, float* state1, float* w) {
    DenseUpdateArgs args;
    args.n = kN;
    args.grad = grad.data();
    args.state[0] = state0;
    args.state[1] = state1;
    args.param = w;
    return RunDenseUpdate(*backend, **FindDenseOptimizer(kind), p, args);
  };

  std::vector<float> w = param;
  ASSERT_TRUE(run(OptimizerKind::kSgd, nullptr, nullptr, w.data()).ok());
  for (size_t i = 0; i < kN; ++i) {
    ASSERT_EQ(w[i], SgdElement(p.lr, p.weight_decay, grad[i], param[i])) << i;
  }
  for (const bool nesterov : {false, true}) {
    p.nesterov = nesterov;
    std::vector<float> vel = state;
    w = param;
    ASSERT_TRUE(
        run(OptimizerKind::kMomentum, vel.data(), nullptr, w.data()).ok());
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
    ASSERT_TRUE(run(decoupled ? OptimizerKind::kAdamW : OptimizerKind::kAdam,
                    m.data(), v.data(), w.data())
                    .ok());
    const AdamScalars s = AdamScalarsOf(p, decoupled);
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

#include "compute/optimizer.h"

#include <cmath>
#include <string>
#include <vector>

#include "compute/cpu_backend.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

// Straightforward double-precision reference of each optimizer (PyTorch's
// documented update rules), run side by side with the backend kernels.
struct Reference {
  OptimizerConfig c;
  std::vector<double> p, m, v;
  int64_t t = 0;
  void Step(const std::vector<double>& g_in) {
    const double lr = LearningRateAt(c, t);
    ++t;
    for (size_t i = 0; i < p.size(); ++i) {
      double g = g_in[i];
      switch (c.kind) {
        case OptimizerKind::kSgd:
          p[i] -= lr * (g + c.weight_decay * p[i]);
          break;
        case OptimizerKind::kMomentum: {
          g += c.weight_decay * p[i];
          m[i] = c.momentum * m[i] + g;
          p[i] -= lr * (c.nesterov ? g + c.momentum * m[i] : m[i]);
          break;
        }
        case OptimizerKind::kAdam:
        case OptimizerKind::kAdamW: {
          if (c.kind == OptimizerKind::kAdamW) {
            p[i] -= lr * c.weight_decay * p[i];
          } else {
            g += c.weight_decay * p[i];
          }
          m[i] = c.beta1 * m[i] + (1 - c.beta1) * g;
          v[i] = c.beta2 * v[i] + (1 - c.beta2) * g * g;
          const double mhat = m[i] / (1 - std::pow(c.beta1, t));
          const double vhat = v[i] / (1 - std::pow(c.beta2, t));
          p[i] -= lr * mhat / (std::sqrt(vhat) + c.epsilon);
          break;
        }
      }
    }
  }
};

class OptimizerTest : public ::testing::TestWithParam<OptimizerKind> {};

TEST_P(OptimizerTest, MatchesReferenceOverManySteps) {
  auto backend = MakeCpuBackend(1);
  OptimizerConfig config;
  config.kind = GetParam();
  config.lr = 0.05;
  config.weight_decay = 0.01;
  config.nesterov = true;
  config.schedule.kind = ScheduleKind::kCosine;
  config.schedule.warmup_steps = 3;
  config.schedule.total_steps = 20;
  const size_t n = 37;
  auto opt = Optimizer::Create(config, backend.get(), n);
  ASSERT_TRUE(opt.ok()) << opt.status();

  Reference ref{config, std::vector<double>(n), std::vector<double>(n, 0.0),
                std::vector<double>(n, 0.0)};
  std::vector<float> param(n);
  for (size_t i = 0; i < n; ++i)
    param[i] = static_cast<float>(ref.p[i] = std::sin(i + 1.0));
  for (int step = 0; step < 20; ++step) {
    std::vector<float> grad(n);
    std::vector<double> grad_d(n);
    for (size_t i = 0; i < n; ++i)
      grad_d[i] = grad[i] = static_cast<float>(std::cos(step * 0.7 + i));
    ASSERT_TRUE(opt->Apply(grad.data(), param.data()).ok());
    ref.Step(grad_d);
  }
  EXPECT_EQ(opt->steps_applied(), 20);
  for (size_t i = 0; i < n; ++i)
    EXPECT_NEAR(param[i], ref.p[i], 2e-5) << "element " << i;
}

INSTANTIATE_TEST_SUITE_P(
    AllKinds, OptimizerTest,
    ::testing::Values(OptimizerKind::kSgd, OptimizerKind::kMomentum,
                      OptimizerKind::kAdam, OptimizerKind::kAdamW),
    [](const auto& info) { return OptimizerKindName(info.param); });

// The values after `trainable` are state: the update adds the "gradient"
// (the mean change of the state) without learning rate or weight decay;
// the trainable prefix is updated exactly as an optimizer of its own size.
TEST_P(OptimizerTest, StateAfterTheTrainablePrefixIsMovedByItsGradient) {
  auto backend = MakeCpuBackend(1);
  OptimizerConfig config;
  config.kind = GetParam();
  config.lr = 0.1;
  config.weight_decay = 0.5;
  const size_t n = 7, trainable = 4;
  auto opt = Optimizer::Create(config, backend.get(), n, trainable);
  ASSERT_TRUE(opt.ok()) << opt.status();
  EXPECT_EQ(opt->trainable(), trainable);
  auto prefix_only = Optimizer::Create(config, backend.get(), trainable);
  ASSERT_TRUE(prefix_only.ok());
  std::vector<float> param = {1, -2, 3, 0.5, 0.25, 1.0, 7};
  std::vector<float> expected(param.begin(), param.begin() + trainable);
  for (int step = 0; step < 3; ++step) {
    const std::vector<float> grad = {0.5f, -0.25f, 1, 2, 0.125f, -0.5f, 1};
    ASSERT_TRUE(opt->Apply(grad.data(), param.data()).ok());
    ASSERT_TRUE(prefix_only->Apply(grad.data(), expected.data()).ok());
  }
  for (size_t i = 0; i < trainable; ++i) EXPECT_EQ(param[i], expected[i]) << i;
  EXPECT_FLOAT_EQ(param[4], 0.25f + 3 * 0.125f);
  EXPECT_FLOAT_EQ(param[5], 1.0f - 3 * 0.5f);
  EXPECT_FLOAT_EQ(param[6], 10.0f);

  EXPECT_EQ(Optimizer::Create(config, backend.get(), 3, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
  // All state (a PS slice past the parameters): no kernel, only the adds.
  auto state_only = Optimizer::Create(config, backend.get(), 2, 0);
  ASSERT_TRUE(state_only.ok());
  std::vector<float> state = {1, 2};
  const std::vector<float> change = {0.5f, -1};
  ASSERT_TRUE(state_only->Apply(change.data(), state.data()).ok());
  EXPECT_EQ(state, (std::vector<float>{1.5f, 1}));
}

// A ring pipeline stage: ApplyRanges updates its ranges exactly as the
// whole-buffer update does, leaves the rest (and its state) alone, and
// counts one step; a range outside the buffers applies nothing.
TEST_P(OptimizerTest, ApplyRangesUpdatesOnlyThoseRangesAsApplyWould) {
  auto backend = MakeCpuBackend(1);
  OptimizerConfig config;
  config.kind = GetParam();
  config.lr = 0.1;
  config.weight_decay = 0.01;
  const size_t n = 9;
  auto ranged = Optimizer::Create(config, backend.get(), n, 7);
  auto whole = Optimizer::Create(config, backend.get(), n, 7);
  ASSERT_TRUE(ranged.ok() && whole.ok());
  std::vector<float> param = {1, -2, 3, 0.5, 0.25, 1.0, 7, 2, -1};
  std::vector<float> expected = param;
  const std::vector<float> before = param;
  const std::vector<Optimizer::Range> ranges = {{1, 3}, {5, 9}};
  for (int step = 0; step < 3; ++step) {
    std::vector<float> grad(n);
    for (size_t i = 0; i < n; ++i) grad[i] = 0.25f * (i % 4) - 0.5f + step;
    ASSERT_TRUE(ranged->ApplyRanges(grad.data(), param.data(), ranges).ok());
    ASSERT_TRUE(whole->Apply(grad.data(), expected.data()).ok());
  }
  EXPECT_EQ(ranged->steps_applied(), 3);
  for (size_t i = 0; i < n; ++i) {
    const bool in = (i >= 1 && i < 3) || i >= 5;
    EXPECT_EQ(param[i], in ? expected[i] : before[i]) << i;
  }
  const std::vector<float> grad(n, 1.0f);
  EXPECT_EQ(
      ranged->ApplyRanges(grad.data(), param.data(), {{0, 2}, {8, 10}}).code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ranged->steps_applied(), 3);
  EXPECT_EQ(param[0], before[0]);
}

// Skipped elements (no contributor's gradient held them: torch's .grad
// None) keep their value and their optimizer state (no momentum, no weight
// decay); the others, the state after the trainable prefix included, are
// updated as Apply without a skip updates them.
TEST_P(OptimizerTest, SkippedElementsKeepTheirValueAndState) {
  auto backend = MakeCpuBackend(1);
  OptimizerConfig config;
  config.kind = GetParam();
  config.lr = 0.1;
  config.weight_decay = 0.01;
  config.momentum = 0.9;
  ParamGroup group;  // the skip starts inside it and ends after it
  group.lr = 0.3;
  group.weight_decay = 0.05;
  group.ranges = {{0, 4}};
  config.groups = {group};
  const size_t n = 8;  // 6 parameters, then 2 of state
  auto skipping = Optimizer::Create(config, backend.get(), n, 6);
  auto whole = Optimizer::Create(config, backend.get(), n, 6);
  ASSERT_TRUE(skipping.ok() && whole.ok());
  std::vector<float> param = {1, -2, 3, 0.5, 0.25, 1.0, 7, 2};
  std::vector<float> expected = param;
  const std::vector<float> before = param;
  const std::vector<FlatRange> skip = {{1, 2}, {3, 5}};
  std::vector<float> grad(n);
  for (size_t i = 0; i < n; ++i) grad[i] = 0.25f * (i % 3) + 0.5f;
  for (int64_t i : {1, 3, 4}) grad[i] = 0.0f;  // absent: zeros
  ASSERT_TRUE(skipping->Apply(grad.data(), param.data(), 1.0, skip).ok());
  ASSERT_TRUE(whole->Apply(grad.data(), expected.data()).ok());
  EXPECT_EQ(skipping->steps_applied(), 1);
  for (size_t i = 0; i < n; ++i) {
    const bool skipped = i == 1 || i == 3 || i == 4;
    EXPECT_EQ(param[i], skipped ? before[i] : expected[i]) << i;
    if (skipped) {
      EXPECT_NE(expected[i], before[i]) << i;  // decay moved it
    }
  }
  for (DeviceBuffer* state : skipping->StateBuffers()) {
    for (int64_t i : {1, 3, 4}) EXPECT_EQ(state->data()[i], 0.0f) << i;
  }
  // A skip that reaches the state, or is not sorted and disjoint, is
  // refused and applies nothing.
  const std::vector<float> kept = param;
  for (const std::vector<FlatRange>& bad : std::vector<std::vector<FlatRange>>{
           {{5, 7}}, {{3, 4}, {1, 2}}, {{1, 3}, {2, 4}}, {{2, 2}}}) {
    EXPECT_EQ(skipping->Apply(grad.data(), param.data(), 1.0, bad).code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(skipping->steps_applied(), 1);
  EXPECT_EQ(param, kept);
}

// Parameter groups: an optimizer over a whole buffer with a group over some
// of its elements updates each element as an optimizer of that element's
// settings (its group's rate table and weight decay, or the config's)
// would; one over a shard's slice (offset) places the group by the offset.
TEST_P(OptimizerTest, GroupsUpdateTheirElementsWithTheirOwnSettings) {
  auto backend = MakeCpuBackend(1);
  OptimizerConfig config;
  config.kind = GetParam();
  config.lr = 0.1;
  config.weight_decay = 0.2;
  config.lr_by_step = {0.1, 0.05};
  ParamGroup no_decay;
  no_decay.lr = 0.3;
  no_decay.weight_decay = 0;
  no_decay.lr_by_step = {0.3, 0.2, 0.1};
  no_decay.ranges = {{2, 5}, {8, 9}};
  config.groups = {no_decay};
  ASSERT_TRUE(ValidateOptimizerConfig(config).ok());
  OptimizerConfig plain = config;  // the config's own settings, no group
  plain.groups.clear();
  OptimizerConfig group = plain;  // the group's settings for every element
  group.lr = no_decay.lr;
  group.weight_decay = 0;
  group.lr_by_step = no_decay.lr_by_step;
  const size_t n = 10;
  auto whole = Optimizer::Create(config, backend.get(), n);
  auto slice = Optimizer::Create(config, backend.get(), 6, 6, /*offset=*/4);
  auto as_plain = Optimizer::Create(plain, backend.get(), n);
  auto as_group = Optimizer::Create(group, backend.get(), n);
  ASSERT_TRUE(whole.ok() && slice.ok() && as_plain.ok() && as_group.ok());
  std::vector<float> param(n), plain_param(n), group_param(n);
  for (size_t i = 0; i < n; ++i) {
    param[i] = plain_param[i] = group_param[i] = std::sin(i + 1.0f);
  }
  std::vector<float> slice_param(param.begin() + 4, param.end());
  for (int step = 0; step < 4; ++step) {
    std::vector<float> grad(n);
    for (size_t i = 0; i < n; ++i) grad[i] = std::cos(step * 0.7f + i);
    ASSERT_TRUE(whole->Apply(grad.data(), param.data()).ok());
    ASSERT_TRUE(slice->Apply(grad.data() + 4, slice_param.data()).ok());
    ASSERT_TRUE(as_plain->Apply(grad.data(), plain_param.data()).ok());
    ASSERT_TRUE(as_group->Apply(grad.data(), group_param.data()).ok());
  }
  for (size_t i = 0; i < n; ++i) {
    const bool in_group = (i >= 2 && i < 5) || i == 8;
    EXPECT_EQ(param[i], in_group ? group_param[i] : plain_param[i]) << i;
    if (i >= 4) {
      EXPECT_EQ(slice_param[i - 4], param[i]) << i;
    }
  }
  EXPECT_NE(group_param[3], plain_param[3]);  // the settings made a difference
}

TEST_P(OptimizerTest, LrScaleMultipliesEveryRateOfTheUpdate) {
  auto backend = MakeCpuBackend(1);
  OptimizerConfig config;
  config.kind = GetParam();
  config.lr = 0.1;
  config.weight_decay = 0.2;
  config.schedule.kind = ScheduleKind::kStep;
  config.schedule.step_size = 2;
  config.schedule.gamma = 0.5;
  ParamGroup tabled;
  tabled.lr = 0.3;
  tabled.weight_decay = 0;
  tabled.lr_by_step = {0.3, 0.2, 0.1};
  tabled.ranges = {{2, 5}};
  config.groups = {tabled};
  // The same job with every rate a quarter (exact in binary).
  constexpr double kScale = 0.25;
  OptimizerConfig quarter = config;
  quarter.lr *= kScale;
  for (double& lr : quarter.groups[0].lr_by_step) lr *= kScale;
  quarter.groups[0].lr *= kScale;
  const size_t n = 8;
  auto scaled = Optimizer::Create(config, backend.get(), n);
  auto reference = Optimizer::Create(quarter, backend.get(), n);
  auto full = Optimizer::Create(config, backend.get(), n);
  ASSERT_TRUE(scaled.ok() && reference.ok() && full.ok());
  std::vector<float> param(n), reference_param(n), full_param(n);
  for (size_t i = 0; i < n; ++i) {
    param[i] = reference_param[i] = full_param[i] = std::sin(i + 1.0f);
  }
  for (int step = 0; step < 5; ++step) {
    std::vector<float> grad(n);
    for (size_t i = 0; i < n; ++i) grad[i] = std::cos(step * 0.7f + i);
    ASSERT_TRUE(scaled->Apply(grad.data(), param.data(), kScale).ok());
    ASSERT_TRUE(reference->Apply(grad.data(), reference_param.data()).ok());
    ASSERT_TRUE(full->Apply(grad.data(), full_param.data()).ok());
  }
  EXPECT_EQ(scaled->steps_applied(), 5);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_FLOAT_EQ(param[i], reference_param[i]) << i;
  }
  EXPECT_NE(param[0], full_param[0]);  // the scale made a difference
  EXPECT_NE(param[3], full_param[3]);  // in the group too
}

TEST(LrScheduleTest, TablesGiveEachUpdatesRateAndTheLastHolds) {
  OptimizerConfig c;
  c.lr = 0.0;  // a warm-up from 0: allowed with a table
  c.lr_by_step = {0.0, 0.5, 1.0};
  ParamGroup scaled;  // no table: its lr under the config's schedule
  scaled.lr = 2.0;
  ParamGroup tabled;
  tabled.lr = 3.0;
  tabled.lr_by_step = {3.0, 1.5};
  c.groups = {scaled, tabled};
  c.schedule.kind = ScheduleKind::kStep;
  c.schedule.step_size = 2;
  c.schedule.gamma = 0.5;
  ASSERT_TRUE(ValidateOptimizerConfig(c).ok());
  EXPECT_DOUBLE_EQ(LearningRateAt(c, 0), 0.0);
  EXPECT_DOUBLE_EQ(LearningRateAt(c, 2), 1.0);
  EXPECT_DOUBLE_EQ(LearningRateAt(c, 100), 1.0);
  EXPECT_DOUBLE_EQ(GroupLearningRateAt(c, 0, 1), 2.0);
  EXPECT_DOUBLE_EQ(GroupLearningRateAt(c, 0, 2), 1.0);
  EXPECT_DOUBLE_EQ(GroupLearningRateAt(c, 1, 0), 3.0);
  EXPECT_DOUBLE_EQ(GroupLearningRateAt(c, 1, 7), 1.5);
  EXPECT_DOUBLE_EQ(FirstGroupLearningRateAt(c, 2), 1.0);
}

TEST(OptimizerConfigTest, RejectsBadGroupsAndTables) {
  OptimizerConfig c;
  ParamGroup a;
  a.ranges = {{0, 4}};
  ParamGroup b;
  b.ranges = {{3, 6}};
  c.groups = {a, b};
  absl::Status overlap = ValidateOptimizerConfig(c);
  EXPECT_EQ(overlap.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(overlap.message().find("[3, 4) are in two parameter groups"),
            std::string::npos)
      << overlap;
  c.groups = {a};
  c.groups[0].lr_by_step = {0.1, -1};
  EXPECT_NE(ValidateOptimizerConfig(c).message().find("update 1"),
            std::string::npos);
  c.groups[0].lr_by_step.clear();
  c.groups[0].weight_decay = std::nan("");
  EXPECT_FALSE(ValidateOptimizerConfig(c).ok());
  c = OptimizerConfig();
  c.lr_by_step.assign(kMaxLrTableEntries + 1, 0.1);
  EXPECT_NE(ValidateOptimizerConfig(c).message().find("at most"),
            std::string::npos);
  c = OptimizerConfig();
  c.lr = 0;  // without a table, a rate of 0 trains nothing
  EXPECT_FALSE(ValidateOptimizerConfig(c).ok());
}

TEST(OptimizerConfigTest, GroupSpansInASliceAreShiftedAndSorted) {
  OptimizerConfig c;
  ParamGroup a;
  a.ranges = {{10, 20}, {0, 3}};
  ParamGroup b;
  b.ranges = {{5, 8}};
  c.groups = {a, b};
  const std::vector<GroupSpan> spans = GroupSpansIn(c, 2, 10);  // [2, 12)
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].begin, 0u);
  EXPECT_EQ(spans[0].end, 1u);
  EXPECT_EQ(spans[0].group, 0u);
  EXPECT_EQ(spans[1].begin, 3u);
  EXPECT_EQ(spans[1].end, 6u);
  EXPECT_EQ(spans[1].group, 1u);
  EXPECT_EQ(spans[2].begin, 8u);
  EXPECT_EQ(spans[2].end, 10u);
  EXPECT_TRUE(GroupSpansIn(c, 30, 5).empty());
  // Adjacent tensors of one group are one span; of two groups, two.
  c.groups[0].ranges = {{0, 3}, {3, 5}};
  c.groups[1].ranges = {{5, 8}};
  const std::vector<GroupSpan> merged = GroupSpansIn(c, 0, 10);
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(merged[0].end, 5u);
  EXPECT_EQ(merged[1].begin, 5u);
}

TEST(LrScheduleTest, AsyncPushesScaleTheRateByTheirShareOfTheBatch) {
  EXPECT_DOUBLE_EQ(AsyncLrScale(64, 256), 0.25);
  EXPECT_DOUBLE_EQ(AsyncLrScale(256, 256), 1.0);
  EXPECT_DOUBLE_EQ(AsyncLrScale(86, 256), 86.0 / 256.0);
  EXPECT_DOUBLE_EQ(AsyncLrScale(64, 0), 1.0);  // no batch known: unscaled
  EXPECT_DOUBLE_EQ(AsyncLrScale(0, 256), 1.0);
}

TEST(LrScheduleTest, ScheduleInUpdatesStretchesWarmupAndDecaySteps) {
  OptimizerConfig c;
  c.schedule.kind = ScheduleKind::kStep;
  c.schedule.warmup_steps = 200;
  c.schedule.step_size = 50;
  c.lr_by_step = {0.1, 0.05};
  OptimizerConfig three = c;
  ScheduleInUpdates(three, 3);
  EXPECT_EQ(three.schedule.warmup_steps, 600);
  EXPECT_EQ(three.schedule.step_size, 150);
  EXPECT_EQ(three.lr_by_step, c.lr_by_step);  // per update already
  // Update 3k of the stretched schedule has step k's rate.
  for (int64_t k : {0, 10, 199, 200, 260}) {
    EXPECT_DOUBLE_EQ(LearningRateAt(three, 3 * k), LearningRateAt(c, k)) << k;
  }
  OptimizerConfig one = c;
  ScheduleInUpdates(one, 1);
  EXPECT_EQ(one.schedule.warmup_steps, 200);
}

TEST(LrScheduleTest, WarmupThenCosineReachesFloor) {
  OptimizerConfig c;
  c.lr = 1.0;
  c.schedule.kind = ScheduleKind::kCosine;
  c.schedule.warmup_steps = 4;
  c.schedule.total_steps = 104;
  c.schedule.min_lr_ratio = 0.1;
  EXPECT_DOUBLE_EQ(LearningRateAt(c, 0), 0.25);
  EXPECT_DOUBLE_EQ(LearningRateAt(c, 3), 1.0);
  EXPECT_DOUBLE_EQ(LearningRateAt(c, 4), 1.0);
  EXPECT_NEAR(LearningRateAt(c, 54), 0.55, 1e-12);
  EXPECT_NEAR(LearningRateAt(c, 104), 0.1, 1e-12);
  EXPECT_NEAR(LearningRateAt(c, 500), 0.1, 1e-12);
}

TEST(LrScheduleTest, StepDecay) {
  OptimizerConfig c;
  c.lr = 1.0;
  c.schedule.kind = ScheduleKind::kStep;
  c.schedule.step_size = 10;
  c.schedule.gamma = 0.5;
  EXPECT_DOUBLE_EQ(LearningRateAt(c, 9), 1.0);
  EXPECT_DOUBLE_EQ(LearningRateAt(c, 10), 0.5);
  EXPECT_DOUBLE_EQ(LearningRateAt(c, 25), 0.25);
}

TEST(OptimizerConfigTest, RejectsUntrainableConfigs) {
  OptimizerConfig c;
  c.lr = 0;
  EXPECT_FALSE(ValidateOptimizerConfig(c).ok());
  c.lr = std::nan("");
  EXPECT_FALSE(ValidateOptimizerConfig(c).ok());
  c = OptimizerConfig();
  c.beta2 = 1.0;
  EXPECT_FALSE(ValidateOptimizerConfig(c).ok());
  c = OptimizerConfig();
  c.schedule.kind = ScheduleKind::kCosine;
  EXPECT_FALSE(ValidateOptimizerConfig(c).ok());
  EXPECT_FALSE(ParseOptimizerKind("rmsprop").ok());
  EXPECT_EQ(*ParseOptimizerKind("adamw"), OptimizerKind::kAdamW);
}

}  // namespace
}  // namespace ferry

#include "model/sequential_model.h"

#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "compute/cpu_backend.h"
#include "gtest/gtest.h"
#include "model/mlp.h"
#include "model/model_presets.h"

namespace ferry {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<int32_t> Labels(int n, int classes) {
  std::vector<int32_t> l(n);
  for (int i = 0; i < n; ++i) l[i] = (i * 7 + 3) % classes;
  return l;
}

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

// Today's MLP and the mlp preset give the same bits: loss, every gradient,
// and the gradient-ready ranges.
TEST(SequentialModelTest, EqualsTodaysMlpBitForBit) {
  auto backend = MakeCpuBackend(1);
  for (const std::vector<int>& sizes : std::vector<std::vector<int>>{
           {784, 256, 128, 10}, {20, 16, 8, 5}, {6, 3}}) {
    auto mlp = Mlp::Create(sizes, backend.get());
    auto seq = SequentialModel::Create(MlpModelDef(sizes), backend.get());
    ASSERT_TRUE(mlp.ok() && seq.ok()) << seq.status();
    EXPECT_EQ(seq->input_dim(), mlp->input_dim());
    EXPECT_EQ(seq->num_classes(), mlp->num_classes());
    EXPECT_EQ(seq->layout().TensorSizes(), mlp->layout().TensorSizes());
    const std::vector<float> params = mlp->InitialParameters(11);
    ASSERT_EQ(seq->InitialParameters(11), params);
    const int batch = 9;
    const std::vector<float> x = Random(batch * sizes[0], 2);
    const std::vector<int32_t> labels = Labels(batch, sizes.back());
    std::vector<float> g1(params.size()), g2(params.size(), 5.0f);
    Ranges r1, r2;
    auto s1 =
        mlp->ForwardBackward(params.data(), x.data(), labels.data(), batch,
                             0.25f, g1.data(), [&](int64_t o, int64_t n) {
                               r1.push_back({o, n});
                             });
    auto s2 =
        seq->ForwardBackward(params.data(), x.data(), labels.data(), batch,
                             0.25f, g2.data(), [&](int64_t o, int64_t n) {
                               r2.push_back({o, n});
                             });
    ASSERT_TRUE(s1.ok() && s2.ok()) << s2.status();
    EXPECT_EQ(s1->loss_sum, s2->loss_sum);
    EXPECT_EQ(s1->correct, s2->correct);
    EXPECT_EQ(0, std::memcmp(g1.data(), g2.data(), g1.size() * sizeof(float)));
    EXPECT_EQ(r1, r2);
    auto e1 = mlp->Evaluate(params.data(), x.data(), labels.data(), batch);
    auto e2 = seq->Evaluate(params.data(), x.data(), labels.data(), batch);
    EXPECT_EQ(e1->loss_sum, e2->loss_sum);
  }
}

// A tiny network with every layer type.
ModelDef TinyConvNet() {
  auto def = ParseModelJson(R"({
    "format": "ferry.model.v1",
    "input": {"shape": [2, 6, 6]},
    "classes": 3,
    "layers": [
      {"type": "Conv2d", "args": {"in_channels": 2, "out_channels": 3,
                                  "kernel_size": 3, "padding": 1}},
      {"type": "BatchNorm2d", "args": {"num_features": 3}},
      {"type": "ReLU"},
      {"type": "MaxPool2d", "args": {"kernel_size": 2}},
      {"type": "Dropout", "args": {"p": 0.3}},
      {"type": "Conv2d", "args": {"in_channels": 3, "out_channels": 2,
                                  "kernel_size": 2, "stride": 1}},
      {"type": "AvgPool2d", "args": {"kernel_size": 2, "stride": 1}},
      {"type": "Flatten"},
      {"type": "Linear", "args": {"in_features": 2, "out_features": 4}},
      {"type": "BatchNorm1d", "args": {"num_features": 4}},
      {"type": "ReLU"},
      {"type": "Linear", "args": {"in_features": 4, "out_features": 3}}
    ]})");
  EXPECT_TRUE(def.ok()) << def.status();
  return *def;
}

TEST(SequentialModelTest, WholeModelGradientMatchesFiniteDifferences) {
  auto backend = MakeCpuBackend(1);
  auto model = SequentialModel::Create(TinyConvNet(), backend.get());
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<float> params = model->InitialParameters(4);
  const std::vector<float> noise = Random(params.size(), 9, 0.1f);
  for (size_t i = 0; i < params.size(); ++i) params[i] += noise[i];
  const int batch = 5;
  const std::vector<float> x = Random(batch * model->input_dim(), 3);
  const std::vector<int32_t> labels = Labels(batch, 3);
  const StepContext ctx{7, 3, 20};
  std::vector<float> grads(params.size());
  Ranges ready;
  auto stats = model->ForwardBackward(
      params.data(), x.data(), labels.data(), batch, 1.0f, grads.data(),
      [&](int64_t o, int64_t n) {
        ready.push_back({o, n});
      },
      ctx);
  ASSERT_TRUE(stats.ok()) << stats.status();
  // Ranges: last layer first, contiguous, covering the whole buffer.
  int64_t end = model->layout().total_elements();
  for (const auto& [offset, length] : ready) {
    EXPECT_EQ(offset + length, end);
    end = offset;
  }
  EXPECT_EQ(end, 0);
  EXPECT_EQ(ready.size(), 6u);  // conv, bn, conv, linear, bn, linear

  std::vector<float> scratch(params.size());
  auto loss = [&](const std::vector<float>& p) {
    auto s = model->ForwardBackward(p.data(), x.data(), labels.data(), batch,
                                    1.0f, scratch.data(), {}, ctx);
    EXPECT_TRUE(s.ok());
    return s->loss_sum;
  };
  const float h = 1e-3f;
  for (size_t i = 0; i < params.size(); ++i) {
    std::vector<float> plus = params, minus = params;
    plus[i] += h;
    minus[i] -= h;
    const double numeric = (loss(plus) - loss(minus)) / (2 * h);
    EXPECT_NEAR(grads[i], numeric, 3e-3 + 2e-2 * std::abs(numeric))
        << model->layout().tensors().size() << " param " << i;
  }
}

// A global batch split across two workers (first_sample 0 and 4) draws the
// same dropout masks as one process: the gradient sums are equal.
TEST(SequentialModelTest, DropoutMasksFollowTheGlobalSamplePosition) {
  auto def = ParseModelJson(R"({
    "format": "ferry.model.v1", "input": {"shape": [1, 5, 5]}, "classes": 3,
    "layers": [
      {"type": "Conv2d", "args": {"in_channels": 1, "out_channels": 2,
                                  "kernel_size": 3}},
      {"type": "ReLU"}, {"type": "Dropout", "args": {"p": 0.5}},
      {"type": "Flatten"},
      {"type": "Linear", "args": {"in_features": 18, "out_features": 3}}]})");
  ASSERT_TRUE(def.ok()) << def.status();
  auto backend = MakeCpuBackend(1);
  auto model = SequentialModel::Create(*def, backend.get());
  ASSERT_TRUE(model.ok());
  const std::vector<float> params = model->InitialParameters(1);
  const int batch = 8, half = 4, dim = model->input_dim();
  const std::vector<float> x = Random(batch * dim, 5);
  const std::vector<int32_t> labels = Labels(batch, 3);
  std::vector<float> whole(params.size()), a(params.size()), b(params.size());
  auto sw = model->ForwardBackward(params.data(), x.data(), labels.data(),
                                   batch, 1.0f, whole.data(), {}, {3, 11, 0});
  auto sa = model->ForwardBackward(params.data(), x.data(), labels.data(), half,
                                   1.0f, a.data(), {}, {3, 11, 0});
  auto sb = model->ForwardBackward(params.data(), x.data() + half * dim,
                                   labels.data() + half, half, 1.0f, b.data(),
                                   {}, {3, 11, half});
  ASSERT_TRUE(sw.ok() && sa.ok() && sb.ok());
  EXPECT_NEAR(sw->loss_sum, sa->loss_sum + sb->loss_sum, 1e-5);
  for (size_t i = 0; i < whole.size(); ++i) {
    EXPECT_NEAR(whole[i], a[i] + b[i], 1e-5) << i;
  }
  // Another step draws other masks.
  std::vector<float> other(params.size());
  ASSERT_TRUE(model
                  ->ForwardBackward(params.data(), x.data(), labels.data(),
                                    batch, 1.0f, other.data(), {}, {3, 12, 0})
                  .ok());
  EXPECT_NE(other, whole);
}

TEST(SequentialModelTest, BatchNormTrainsRunningStatsAndEvaluatesWithThem) {
  auto def = ParseModelJson(R"({
    "format": "ferry.model.v1", "input": {"shape": [2]}, "classes": 2,
    "layers": [
      {"type": "BatchNorm1d", "args": {"num_features": 2, "momentum": 0.5}},
      {"type": "Linear", "args": {"in_features": 2, "out_features": 2}}]})");
  ASSERT_TRUE(def.ok()) << def.status();
  auto backend = MakeCpuBackend(1);
  auto model = SequentialModel::Create(*def, backend.get());
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(*model->GetState(), (std::vector<float>{0, 0, 1, 1, 0}));
  std::vector<float> params = {1.0f, 2.0f, 0.5f, -1.0f,  // BN gamma, beta
                               1.0f, 0.0f, 0.0f, 1.0f,   // W = I
                               0.0f, 0.0f};              // b
  const std::vector<float> x = {1, 10, 3, 20, 5, 30};    // 3 samples
  const std::vector<int32_t> labels = {0, 1, 0};
  std::vector<float> grads(params.size());
  ASSERT_TRUE(model
                  ->ForwardBackward(params.data(), x.data(), labels.data(), 3,
                                    1.0f, grads.data())
                  .ok());
  // Batch means 3 and 20, unbiased variances 4 and 100; momentum 0.5.
  const std::vector<float> state = *model->GetState();
  EXPECT_NEAR(state[0], 1.5, 1e-6);
  EXPECT_NEAR(state[1], 10.0, 1e-5);
  EXPECT_NEAR(state[2], 2.5, 1e-6);
  EXPECT_NEAR(state[3], 50.5, 1e-4);
  EXPECT_EQ(state[4], 1.0f);  // num_batches_tracked
  // Evaluation of one sample (batch statistics would be undefined) uses the
  // running statistics and leaves them alone.
  const std::vector<float> one = {2.0f, 12.0f};
  auto eval = model->Evaluate(params.data(), one.data(), labels.data(), 1);
  ASSERT_TRUE(eval.ok()) << eval.status();
  const double z0 = 1.0 * (2.0 - 1.5) / std::sqrt(2.5 + 1e-5) + 0.5;
  const double z1 = 2.0 * (12.0 - 10.0) / std::sqrt(50.5 + 1e-5) - 1.0;
  const double want = std::log(std::exp(z0) + std::exp(z1)) - z0;
  EXPECT_NEAR(eval->loss_sum, want, 1e-5);
  EXPECT_EQ(*model->GetState(), state);
  // Training needs two values per channel.
  EXPECT_EQ(model
                ->ForwardBackward(params.data(), one.data(), labels.data(), 1,
                                  1.0f, grads.data())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(model->SetState({1, 2}).ok());
}

TEST(SequentialModelTest, ConvNetPresetRunsAndShrinksTheLossOnABatch) {
  auto backend = MakeCpuBackend(1);
  auto model = SequentialModel::Create(ConvNetModelDef(), backend.get());
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(model->layout().total_elements(), 1199882);
  EXPECT_EQ(model->input_dim(), 784);
  std::vector<float> params = model->InitialParameters(1);
  const int batch = 8;
  const std::vector<float> x = Random(batch * 784, 2);
  const std::vector<int32_t> labels = Labels(batch, 10);
  std::vector<float> grads(params.size());
  double first = 0, last = 0;
  for (int step = 0; step < 5; ++step) {
    auto s =
        model->ForwardBackward(params.data(), x.data(), labels.data(), batch,
                               1.0f / batch, grads.data(), {}, {1, step, 0});
    ASSERT_TRUE(s.ok()) << s.status();
    if (step == 0) first = s->loss_sum;
    last = s->loss_sum;
    for (size_t i = 0; i < params.size(); ++i) params[i] -= 0.05f * grads[i];
  }
  EXPECT_LT(last, first);
  // A smaller batch reuses the workspaces.
  EXPECT_TRUE(model->Evaluate(params.data(), x.data(), labels.data(), 3).ok());
  EXPECT_FALSE(model->Evaluate(params.data(), x.data(), labels.data(), 0).ok());
}

}  // namespace
}  // namespace ferry

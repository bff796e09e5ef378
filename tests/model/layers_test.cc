// Finite-difference checks of every layer's backward pass, parameters and
// inputs, through the Layer interface on the CPU backend: for
// L(x, params) = <layer(x), r>, Backward(dy = r) must give dL/dx and
// dL/dparams.
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "compute/cpu_backend.h"
#include "gtest/gtest.h"
#include "model/layer.h"
#include "model/model_def.h"
#include "model/model_params.h"
#include "model/shape_inference.h"
#include "tests/testing/random_values.h"

namespace ferry {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  return testing::RandomValues(n, seed);
}

struct Case {
  std::string name;
  LayerDef def;
  SampleShape in;
  bool training = true;
};

LayerDef Def(LayerType type) {
  LayerDef d;
  d.type = type;
  return d;
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  LayerDef linear = Def(LayerType::kLinear);
  linear.in_features = 5;
  linear.out_features = 3;
  cases.push_back({"Linear", linear, {5}});
  linear.bias = false;
  cases.push_back({"LinearNoBias", linear, {5}});
  LayerDef conv = Def(LayerType::kConv2d);
  conv.in_channels = 2;
  conv.out_channels = 3;
  conv.kernel_size = {3, 2};
  conv.stride = {2, 1};
  conv.padding = {1, 1};
  cases.push_back({"Conv2dStridePad", conv, {2, 5, 4}});
  conv.kernel_size = {3, 3};
  conv.stride = {1, 1};
  conv.padding = {0, 0};
  cases.push_back({"Conv2d", conv, {2, 5, 5}});
  LayerDef max = Def(LayerType::kMaxPool2d);
  max.kernel_size = max.stride = {2, 2};
  cases.push_back({"MaxPool2d", max, {2, 4, 5}});
  max.kernel_size = {3, 3};
  max.stride = {1, 1};
  max.padding = {1, 1};
  cases.push_back({"MaxPool2dOverlapping", max, {1, 4, 4}});
  LayerDef avg = Def(LayerType::kAvgPool2d);
  avg.kernel_size = {2, 2};
  avg.stride = {1, 1};
  avg.padding = {1, 1};
  cases.push_back({"AvgPool2d", avg, {2, 3, 4}});
  cases.push_back({"ReLU", Def(LayerType::kReLU), {2, 3, 3}});
  LayerDef drop = Def(LayerType::kDropout);
  drop.p = 0.4;
  cases.push_back({"Dropout", drop, {12}});
  cases.push_back({"DropoutEval", drop, {12}, false});
  LayerDef bn2 = Def(LayerType::kBatchNorm2d);
  bn2.num_features = 2;
  cases.push_back({"BatchNorm2d", bn2, {2, 3, 2}});
  LayerDef bn1 = Def(LayerType::kBatchNorm1d);
  bn1.num_features = 4;
  bn1.eps = 1e-3;
  cases.push_back({"BatchNorm1d", bn1, {4}});
  return cases;
}

class LayerGradientTest : public ::testing::TestWithParam<Case> {};

TEST_P(LayerGradientTest, BackwardMatchesFiniteDifferences) {
  const Case& c = GetParam();
  ModelDef one;
  one.input.shape = c.in;
  one.layers = {c.def};
  auto shapes = InferShapes(one);
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  const SampleShape out = shapes->front();
  auto layer = MakeLayer(c.def, 3, c.in, out);
  ASSERT_TRUE(layer.ok()) << layer.status();
  auto backend = MakeCpuBackend(1);
  const int batch = 3;
  ASSERT_TRUE((*layer)->Reserve(backend.get(), batch).ok());
  int64_t num_params = 0;
  for (const auto& t : LayerParamDefs(c.def)) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    num_params += n;
  }
  std::vector<float> params = Random(num_params, 1);
  std::vector<float> state(2 * c.def.num_features + 1, 0.0f);
  for (int64_t i = 0; i < c.def.num_features; ++i) {
    state[c.def.num_features + i] = 1.5f;
  }
  const size_t in_n = batch * ShapeElements(c.in);
  const size_t out_n = batch * ShapeElements(out);
  const std::vector<float> x = Random(in_n, 2), r = Random(out_n, 3);
  LayerContext ctx;
  ctx.backend = backend.get();
  ctx.batch = batch;
  ctx.training = c.training;
  ctx.seed = 5;
  ctx.step = 2;
  ctx.first_sample = 10;

  auto loss = [&](const std::vector<float>& xs, const std::vector<float>& ps) {
    std::vector<float> y(out_n), st = state;
    EXPECT_TRUE((*layer)
                    ->Forward(ctx, ps.empty() ? nullptr : ps.data(), st.data(),
                              xs.data(), y.data())
                    .ok());
    double l = 0;
    for (size_t i = 0; i < out_n; ++i) l += static_cast<double>(y[i]) * r[i];
    return l;
  };
  std::vector<float> y(out_n), dx(in_n, 99.0f), dparams(num_params, 99.0f);
  std::vector<float> st = state;
  ASSERT_TRUE((*layer)
                  ->Forward(ctx, params.empty() ? nullptr : params.data(),
                            st.data(), x.data(), y.data())
                  .ok());
  if (!c.training) {
    EXPECT_EQ(y, x);  // eval dropout is the identity
    return;
  }
  ASSERT_TRUE((*layer)
                  ->Backward(ctx, params.empty() ? nullptr : params.data(),
                             x.data(), y.data(), r.data(), dx.data(),
                             dparams.empty() ? nullptr : dparams.data())
                  .ok());
  const float h = 1e-3f;
  for (size_t i = 0; i < in_n; ++i) {
    std::vector<float> xp = x, xm = x;
    xp[i] += h;
    xm[i] -= h;
    const double numeric = (loss(xp, params) - loss(xm, params)) / (2 * h);
    EXPECT_NEAR(dx[i], numeric, 2e-3 + 1e-2 * std::abs(numeric))
        << c.name << " input " << i;
  }
  for (int64_t i = 0; i < num_params; ++i) {
    std::vector<float> pp = params, pm = params;
    pp[i] += h;
    pm[i] -= h;
    const double numeric = (loss(x, pp) - loss(x, pm)) / (2 * h);
    EXPECT_NEAR(dparams[i], numeric, 2e-3 + 1e-2 * std::abs(numeric))
        << c.name << " param " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AllLayers, LayerGradientTest,
                         ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

// A batch the CPU's columns budget cuts into groups (7 samples of 9 x 3844
// columns fit 1 MiB, so 8 samples run as a group of 7 through
// SwapLeadingAxes and a group of 1 straight into NCHW): outputs, input
// gradients and the weight gradient summed over the groups equal the layer
// run one sample at a time.
TEST(LayerTest, Conv2dGroupsOfSamplesEqualOneSampleAtATime) {
  LayerDef conv = Def(LayerType::kConv2d);
  conv.in_channels = 1;
  conv.out_channels = 4;
  conv.kernel_size = {3, 3};
  const SampleShape in = {1, 64, 64};
  ModelDef one;
  one.input.shape = in;
  one.layers = {conv};
  auto shapes = InferShapes(one);
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  const SampleShape out = shapes->front();
  auto layer = MakeLayer(conv, 0, in, out);
  ASSERT_TRUE(layer.ok()) << layer.status();
  auto backend = MakeCpuBackend(1);
  const int batch = 8;
  ASSERT_TRUE((*layer)->Reserve(backend.get(), batch).ok());
  const size_t in_n = ShapeElements(in), out_n = ShapeElements(out);
  const size_t num_params = 4 * 9 + 4;
  const std::vector<float> params = Random(num_params, 1);
  const std::vector<float> x = Random(batch * in_n, 2);
  const std::vector<float> dy = Random(batch * out_n, 3);
  LayerContext ctx;
  ctx.backend = backend.get();
  ctx.training = true;
  ctx.batch = batch;
  std::vector<float> y(batch * out_n), dx(batch * in_n), dw(num_params);
  ASSERT_TRUE(
      (*layer)->Forward(ctx, params.data(), nullptr, x.data(), y.data()).ok());
  ASSERT_TRUE((*layer)
                  ->Backward(ctx, params.data(), x.data(), y.data(), dy.data(),
                             dx.data(), dw.data())
                  .ok());
  ctx.batch = 1;
  std::vector<float> y1(out_n), dx1(in_n), dw1(num_params);
  std::vector<double> dw_sum(num_params, 0.0);
  for (int i = 0; i < batch; ++i) {
    ASSERT_TRUE((*layer)
                    ->Forward(ctx, params.data(), nullptr, x.data() + i * in_n,
                              y1.data())
                    .ok());
    ASSERT_TRUE((*layer)
                    ->Backward(ctx, params.data(), x.data() + i * in_n,
                               y1.data(), dy.data() + i * out_n, dx1.data(),
                               dw1.data())
                    .ok());
    for (size_t k = 0; k < out_n; ++k) {
      ASSERT_NEAR(y[i * out_n + k], y1[k], 1e-5) << "sample " << i;
    }
    for (size_t k = 0; k < in_n; ++k) {
      ASSERT_NEAR(dx[i * in_n + k], dx1[k], 1e-5) << "sample " << i;
    }
    for (size_t k = 0; k < num_params; ++k) dw_sum[k] += dw1[k];
  }
  for (size_t k = 0; k < num_params; ++k) {
    EXPECT_NEAR(dw[k], dw_sum[k], 1e-3 + 1e-5 * std::abs(dw_sum[k]))
        << "param " << k;
  }
  EXPECT_GT((*layer)->WorkspaceElements(batch), 0);
}

TEST(LayerTest, MakeLayerRefusesShapesThatDoNotSuit) {
  LayerDef conv = Def(LayerType::kConv2d);
  conv.in_channels = 1;
  conv.out_channels = 1;
  conv.kernel_size = {1, 1};
  auto layer = MakeLayer(conv, 4, {9}, {9});
  ASSERT_FALSE(layer.ok());
  EXPECT_EQ(layer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(layer.status().message().find("layer 4 (Conv2d)"),
            std::string::npos);
}

}  // namespace
}  // namespace ferry

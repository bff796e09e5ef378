#include "model/model_def.h"

#include <cstring>
#include <string>
#include <vector>

#include "common/file_system.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/model_params.h"
#include "model/model_presets.h"
#include "model/model_spec.h"
#include "model/shape_inference.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

TEST(ModelPresets, ConvNetShapesNamesAndParameterCount) {
  const ModelDef def = ConvNetModelDef();
  auto shapes = InferShapes(def);
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  ASSERT_EQ(shapes->size(), 11u);
  EXPECT_EQ((*shapes)[0], (SampleShape{32, 26, 26}));
  EXPECT_EQ((*shapes)[2], (SampleShape{64, 24, 24}));
  EXPECT_EQ((*shapes)[4], (SampleShape{64, 12, 12}));
  EXPECT_EQ((*shapes)[6], (SampleShape{9216}));
  EXPECT_EQ((*shapes)[10], (SampleShape{10}));
  auto layout = ModelParameterLayout(def);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->total_elements(), 1199882);
  std::vector<std::string> names;
  for (const TensorSlot& t : layout->tensors()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight",
                                             "2.bias", "7.weight", "7.bias",
                                             "10.weight", "10.bias"}));
  EXPECT_EQ(layout->tensors()[2].shape, (std::vector<int64_t>{64, 32, 3, 3}));
  EXPECT_EQ(layout->tensors()[4].shape, (std::vector<int64_t>{128, 9216}));
  auto state = ModelStateLayout(def);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->total_elements(), 0);
}

TEST(ModelPresets, MlpPresetMatchesTodaysMlp) {
  auto def = ResolveModelSpec("mlp");
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ(*def, MlpModelDef({784, 256, 128, 10}));
  EXPECT_EQ(*def, *ResolveModelSpec("784-256-128-10"));
  auto layout = ModelParameterLayout(*def);
  ASSERT_TRUE(layout.ok());
  auto old_layout = MlpLayout({784, 256, 128, 10});
  ASSERT_TRUE(old_layout.ok());
  EXPECT_EQ(layout->TensorSizes(), old_layout->TensorSizes());
  EXPECT_EQ(layout->tensors()[2].name, "2.weight");
  EXPECT_EQ(layout->tensors()[5].name, "4.bias");
}

// Today's results stay unchanged: same draws, same bits.
TEST(ModelPresets, MlpInitIsBitIdenticalToMlpInitialParameters) {
  for (const std::vector<int>& sizes : std::vector<std::vector<int>>{
           {784, 256, 128, 10}, {13, 7, 3}, {5, 3}, {3, 5, 7, 2}}) {
    const ModelDef def = MlpModelDef(sizes);
    auto layout = ModelParameterLayout(def);
    ASSERT_TRUE(layout.ok());
    for (uint64_t seed : {0ull, 42ull, 12345ull}) {
      const std::vector<float> want =
          MlpInitialParameters(sizes, *MlpLayout(sizes), seed);
      const std::vector<float> got = ModelInitialParameters(def, *layout, seed);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(
          0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
          << MlpSpecString(sizes) << " seed " << seed;
    }
  }
}

ModelDef SmallBnNet() {
  const char* json = R"({
    "format": "ferry.model.v1",
    "input": {"shape": [2, 6, 5], "scale": 0.5, "mean": 0.25, "std": 2},
    "classes": 3,
    "layers": [
      {"type": "Conv2d", "args": {"in_channels": 2, "out_channels": 3,
                                  "kernel_size": [3, 2], "padding": [1, 0],
                                  "stride": 1}},
      {"type": "BatchNorm2d", "args": {"num_features": 3, "momentum": 0.2}},
      {"type": "ReLU", "args": {"inplace": true}},
      {"type": "AvgPool2d", "args": {"kernel_size": 2}},
      {"type": "Flatten"},
      {"type": "Dropout", "args": {"p": 0.3}},
      {"type": "Linear", "args": {"in_features": 18, "out_features": 4,
                                  "bias": false}},
      {"type": "BatchNorm1d", "args": {"num_features": 4, "eps": 0.001}},
      {"type": "Linear", "args": {"in_features": 4, "out_features": 3}}
    ]})";
  auto def = ParseModelJson(json);
  EXPECT_TRUE(def.ok()) << def.status();
  return def.ok() ? *def : ModelDef{};
}

TEST(ModelJson, ParsesArgsAndRoundTrips) {
  const ModelDef def = SmallBnNet();
  ASSERT_EQ(def.layers.size(), 9u);
  EXPECT_EQ(def.input.shape, (std::vector<int64_t>{2, 6, 5}));
  EXPECT_EQ(def.input.std, 2.0);
  EXPECT_EQ(def.layers[0].kernel_size, (IntPair{3, 2}));
  EXPECT_EQ(def.layers[0].padding, (IntPair{1, 0}));
  EXPECT_EQ(def.layers[3].stride, (IntPair{2, 2}));  // defaults to kernel
  EXPECT_FALSE(def.layers[6].bias);
  EXPECT_DOUBLE_EQ(def.layers[5].p, 0.3);
  EXPECT_DOUBLE_EQ(def.layers[7].eps, 0.001);
  for (const ModelDef& d : {def, ConvNetModelDef(), MlpModelDef({4, 3})}) {
    const std::string text = ModelToJson(d);
    auto back = ParseModelJson(text);
    ASSERT_TRUE(back.ok()) << back.status() << "\n" << text;
    EXPECT_EQ(*back, d) << text;
  }
  EXPECT_THAT(ModelToJson(def), HasSubstr("\"kernel_size\": [\n"));
  EXPECT_THAT(ModelToJson(ConvNetModelDef()),
              HasSubstr("\"format\": \"ferry.model.v1\""));
}

TEST(ModelJson, StateLayoutAndInitialValuesOfBatchNorm) {
  const ModelDef def = SmallBnNet();
  auto params = ModelParameterLayout(def);
  auto state = ModelStateLayout(def);
  ASSERT_TRUE(params.ok() && state.ok());
  std::vector<std::string> names;
  for (const TensorSlot& t : state->tensors()) names.push_back(t.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{
                "1.running_mean", "1.running_var", "1.num_batches_tracked",
                "7.running_mean", "7.running_var", "7.num_batches_tracked"}));
  EXPECT_EQ(state->tensors()[2].shape, std::vector<int64_t>{});
  EXPECT_EQ(state->total_elements(), 3 + 3 + 1 + 4 + 4 + 1);
  const std::vector<float> s = ModelInitialState(def, *state);
  EXPECT_EQ(
      s, (std::vector<float>{0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0}));
  const std::vector<float> p = ModelInitialParameters(def, *params, 3);
  const TensorSlot& gamma = params->tensors()[*params->IndexOf("1.weight")];
  const TensorSlot& beta = params->tensors()[*params->IndexOf("1.bias")];
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(p[gamma.offset + i], 1.0f);
    EXPECT_EQ(p[beta.offset + i], 0.0f);
  }
  EXPECT_FALSE(params->IndexOf("6.bias").ok());  // bias=false
}

// A shard draws only its slice of the initial values, bit for bit the
// values of the whole buffer: across BatchNorm tensors and the state, an
// odd-sized tensor, and a weight longer than the draw block (65,536).
TEST(ModelJson, AnInitialSliceIsThatSliceOfTheWholeBuffer) {
  for (const ModelDef& def : {SmallBnNet(), MlpModelDef({301, 257, 7})}) {
    auto whole = ModelJobInitialValues(def, 9);
    ASSERT_TRUE(whole.ok()) << whole.status();
    const int64_t n = static_cast<int64_t>(whole->size());
    for (auto [begin, end] :
         std::vector<std::pair<int64_t, int64_t>>{{0, n},
                                                  {1, n - 1},
                                                  {5, 6},
                                                  {65535, 65538},
                                                  {n - 7, n},
                                                  {n, n},
                                                  {3, 3}}) {
      if (end > n || begin > end) continue;
      auto slice = ModelJobInitialSlice(def, 9, begin, end);
      ASSERT_TRUE(slice.ok()) << slice.status();
      EXPECT_EQ(*slice, std::vector<float>(whole->begin() + begin,
                                           whole->begin() + end))
          << "[" << begin << ", " << end << ") of " << n;
    }
    EXPECT_EQ(ModelJobInitialSlice(def, 9, 0, n + 1).status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(ModelJobInitialSlice(def, 9, 2, 1).status().code(),
              absl::StatusCode::kInvalidArgument);
    // Drawn into a buffer: the same values; a buffer of another size is
    // refused and left as it was.
    std::vector<float> filled(static_cast<size_t>(n), -7.0f);
    ASSERT_TRUE(FillModelJobInitialValues(def, 9, absl::MakeSpan(filled)).ok());
    EXPECT_EQ(filled, *whole);
    std::vector<float> longer(static_cast<size_t>(n) + 1, -7.0f);
    EXPECT_EQ(FillModelJobInitialValues(def, 9, absl::MakeSpan(longer)).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(longer[0], -7.0f);
  }
}

absl::Status ParseError(const std::string& layers,
                        const std::string& input = R"({"shape": [4]})",
                        int classes = 3) {
  return ParseModelJson(R"({"format": "ferry.model.v1", "input": )" + input +
                        ", \"classes\": " + std::to_string(classes) +
                        ", \"layers\": " + layers + "}")
      .status();
}

TEST(ModelJson, RefusesBadSpecsNamingTheLayer) {
  const ModelDef convnet = ConvNetModelDef();
  ModelDef bad = convnet;
  bad.layers[7].in_features = 9000;
  EXPECT_EQ(ValidateModel(bad).message(),
            "layer 7 (Linear): in_features is 9000 but its input has 9216 "
            "features");
  std::string text = ModelToJson(bad);
  EXPECT_THAT(std::string(ParseModelJson(text).status().message()),
              HasSubstr("layer 7 (Linear): in_features is 9000"));

  struct Case {
    std::string layers;
    std::string want;
  };
  const std::vector<Case> cases = {
      {R"([{"type": "Linear", "args": {"in_features": 4, "out_features": 3,
           "bais": true}}])",
       "layer 0 (Linear): unknown argument 'bais'"},
      {R"([{"type": "Conv3d", "args": {}}])",
       "layer 0: unknown layer type 'Conv3d'"},
      {R"([{"type": "Linear", "args": {"in_features": 4}}])",
       "layer 0 (Linear): missing argument 'out_features'"},
      {R"([{"type": "Linear", "args": {"in_features": 4.5,
           "out_features": 3}}])",
       "'in_features' must be an integer"},
      {R"([{"type": "Linear", "args": {"in_features": 4, "out_features": 3}},
           {"type": "Dropout", "args": {"p": 1e999}}])",
       "does not parse"},
      {R"([{"type": "Linear", "args": {"in_features": 4, "out_features": 3}},
           {"type": "Dropout", "args": {"p": 1}}])",
       "layer 1 (Dropout): 'p' is 1"},
      {R"([{"type": "Linear", "args": {"in_features": 4, "out_features": 5}}])",
       "layer 0 (Linear): the model's output is [5] but it has 3 classes"},
      {R"([{"type": "Conv2d", "args": {"in_channels": 1, "out_channels": 3,
           "kernel_size": 3}}])",
       "layer 0 (Conv2d): needs a [C, H, W] input, got [4]"},
      {R"([{"type": "Conv2d", "args": {"in_channels": 1, "out_channels": 3,
           "kernel_size": 3, "groups": 2}}])",
       "layer 0 (Conv2d): 'groups' = 2 is not supported"},
      {R"([{"type": "Linear", "args": {"in_features": 4, "out_features": 3},
            "name": "fc"}])",
       "layer 0: unknown key 'name'"},
      {R"([])", "\"layers\" must be a non-empty array"},
  };
  for (const Case& c : cases) {
    const absl::Status status = ParseError(c.layers);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.layers;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.want)) << c.layers;
  }
  const std::string linear =
      R"([{"type": "Linear", "args": {"in_features": 4, "out_features": 3}}])";
  EXPECT_THAT(
      std::string(ParseError(linear, R"({"shape": [4], "std": 0})").message()),
      HasSubstr("'std' is 0"));
  EXPECT_THAT(std::string(ParseError(linear,
                                     R"({"shape": [2000000000, 2000000000,
                                                   2000000000]})")
                              .message()),
              HasSubstr("is too large"));
  EXPECT_THAT(std::string(ParseError(linear, R"({"shape": [4, 4]})").message()),
              HasSubstr("\"shape\" must be [C, H, W] or [F]"));
  // NaN is not JSON: refused by the parser, with its position.
  EXPECT_THAT(
      std::string(
          ParseError(R"([{"type": "Dropout", "args": {"p": NaN}}])").message()),
      HasSubstr("model JSON does not parse"));
  EXPECT_THAT(std::string(ParseModelJson("{").status().message()),
              HasSubstr("does not parse"));
  EXPECT_THAT(
      std::string(ParseModelJson(R"({"format": "v0"})").status().message()),
      HasSubstr("\"format\" must be \"ferry.model.v1\""));
  EXPECT_THAT(
      std::string(ParseModelJson(R"({"format": "ferry.model.v1", "extra": 1})")
                      .status()
                      .message()),
      HasSubstr("unknown key 'extra'"));
}

TEST(ModelSpec, ResolvesPresetsStringsFilesAndDirectories) {
  InMemoryFileSystem fs;
  ASSERT_TRUE(
      fs.WriteFileAtomically("/m/net.json", ModelToJson(ConvNetModelDef()))
          .ok());
  ASSERT_TRUE(
      fs.WriteFileAtomically("/d/model.json", ModelToJson(MlpModelDef({4, 2})))
          .ok());
  ASSERT_TRUE(fs.WriteFileAtomically("/bad.json", "{\"format\": 1}").ok());
  EXPECT_EQ(*ResolveModelSpec("convnet", &fs), ConvNetModelDef());
  EXPECT_EQ(*ResolveModelSpec("/m/net.json", &fs), ConvNetModelDef());
  EXPECT_EQ(*ResolveModelSpec("/d", &fs), MlpModelDef({4, 2}));
  EXPECT_EQ(*ResolveModelSpec("10-3", &fs), MlpModelDef({10, 3}));
  EXPECT_EQ(ResolveModelSpec("10-0-3", &fs).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveModelSpec("/nowhere", &fs).status().code(),
            absl::StatusCode::kNotFound);
  const absl::Status bad = ResolveModelSpec("/bad.json", &fs).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("/bad.json: "));
}

}  // namespace
}  // namespace ferry

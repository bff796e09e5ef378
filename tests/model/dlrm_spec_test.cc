#include "model/dlrm_spec.h"

#include <cmath>
#include <string>

#include "common/file_system.h"
#include "gtest/gtest.h"
#include "model/model_def.h"
#include "model/model_presets.h"

namespace ferry {
namespace {

TEST(DlrmSpecTest, PresetIsDlrmCriteoKaggle) {
  auto spec = DlrmPreset("dlrm");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(*spec, DlrmSpec{});
  EXPECT_EQ(DlrmBottomSizes(*spec),
            (std::vector<int64_t>{13, 512, 256, 64, 16}));
  // 16 + 27 * 26 / 2 = 367 inputs to the top MLP, as in DLRM.
  EXPECT_EQ(DlrmInteractionFeatures(*spec), 367);
  EXPECT_EQ(DlrmTopSizes(*spec), (std::vector<int64_t>{367, 512, 256, 1}));
  EXPECT_EQ(DlrmPresetNames(), std::vector<std::string>{"dlrm"});
  EXPECT_EQ(DlrmPreset("dlrm2").status().code(), absl::StatusCode::kNotFound);
}

TEST(DlrmSpecTest, LayoutHasDlrmStateDictNames) {
  auto layout = DlrmParameterLayout(DlrmSpec{});
  ASSERT_TRUE(layout.ok()) << layout.status();
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  for (const TensorSlot& t : layout->tensors()) {
    names.push_back(t.name);
    shapes.push_back(t.shape);
  }
  EXPECT_EQ(names, (std::vector<std::string>{
                       "bot_l.0.weight", "bot_l.0.bias", "bot_l.2.weight",
                       "bot_l.2.bias", "bot_l.4.weight", "bot_l.4.bias",
                       "bot_l.6.weight", "bot_l.6.bias", "top_l.0.weight",
                       "top_l.0.bias", "top_l.2.weight", "top_l.2.bias",
                       "top_l.4.weight", "top_l.4.bias"}));
  EXPECT_EQ(shapes[0], (std::vector<int64_t>{512, 13}));
  EXPECT_EQ(shapes[6], (std::vector<int64_t>{16, 64}));
  EXPECT_EQ(shapes[8], (std::vector<int64_t>{512, 367}));
  EXPECT_EQ(shapes[12], (std::vector<int64_t>{1, 256}));
  EXPECT_EQ(shapes[13], (std::vector<int64_t>{1}));
  // Bottom 155,984 + top 320,001 dense parameters.
  EXPECT_EQ(layout->total_elements(), 475985);
}

TEST(DlrmSpecTest, InitialParametersSeededLikeLinearLayers) {
  const DlrmSpec spec;
  auto layout = DlrmParameterLayout(spec);
  ASSERT_TRUE(layout.ok());
  const std::vector<float> a = DlrmInitialParameters(spec, *layout, 7);
  EXPECT_EQ(a, DlrmInitialParameters(spec, *layout, 7));
  EXPECT_NE(a, DlrmInitialParameters(spec, *layout, 8));
  for (size_t i = 0; i < layout->tensors().size(); ++i) {
    const TensorSlot& t = layout->tensors()[i];
    double sum = 0, sq = 0;
    for (int64_t k = 0; k < t.numel; ++k) {
      sum += a[t.offset + k];
      sq += a[t.offset + k] * a[t.offset + k];
    }
    if (i % 2 == 1) {  // bias
      EXPECT_EQ(sq, 0.0) << t.name;
      continue;
    }
    const double fan_in = static_cast<double>(t.shape[1]);
    const double fan_out = static_cast<double>(t.shape[0]);
    const double want = t.name == "top_l.4.weight"
                            ? std::sqrt(2.0 / (fan_in + fan_out))  // Xavier
                            : std::sqrt(2.0 / fan_in);             // He
    const double n = static_cast<double>(t.numel);
    const double std = std::sqrt(sq / n - (sum / n) * (sum / n));
    EXPECT_NEAR(std, want, want * (t.numel > 1000 ? 0.05 : 0.3)) << t.name;
  }
}

TEST(DlrmSpecTest, JsonRoundTripsAndDefaultsToThePreset) {
  DlrmSpec s;
  s.dense_features = 3;
  s.num_fields = 5;
  s.embedding_dim = 4;
  s.bottom = {};
  s.top = {7, 2};
  s.pooling = Pooling::kMean;
  const std::string json = DlrmToJson(s);
  EXPECT_TRUE(IsDlrmJson(json));
  auto back = ParseDlrmJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, s);
  auto minimal =
      ParseDlrmJson(R"({"format": "ferry.model.v1", "kind": "dlrm"})");
  ASSERT_TRUE(minimal.ok()) << minimal.status();
  EXPECT_EQ(*minimal, DlrmSpec{});
  auto some = ParseDlrmJson(
      R"({"format": "ferry.model.v1", "kind": "dlrm", "num_fields": 2,
          "top": [], "interaction": "dot"})");
  ASSERT_TRUE(some.ok()) << some.status();
  EXPECT_EQ(some->num_fields, 2);
  EXPECT_TRUE(some->top.empty());
  EXPECT_EQ(some->bottom, DlrmSpec{}.bottom);
}

TEST(DlrmSpecTest, RejectsBadSpecsNamingTheKey) {
  const std::string head = R"({"format": "ferry.model.v1", "kind": "dlrm", )";
  const std::pair<std::string, std::string> cases[] = {
      {R"("num_fields": 0})", "num_fields"},
      {R"("num_fields": 2000})", "num_fields"},
      {R"("embedding_dim": -4})", "embedding_dim"},
      {R"("dense_features": 1.5})", "dense_features"},
      {R"("bottom": [64, 0]})", "bottom[1]"},
      {R"("top": 5})", "top"},
      {R"("top": [8, "x"]})", "top[1]"},
      {R"("pooling": "max"})", "pooling"},
      {R"("pooling": 1})", "pooling"},
      {R"("interaction": "cat"})", "interaction"},
      {R"("embeding_dim": 4})", "unknown key 'embeding_dim'"},
  };
  for (const auto& [tail, needle] : cases) {
    auto s = ParseDlrmJson(head + tail);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << tail;
    EXPECT_NE(s.status().message().find(needle), std::string::npos)
        << tail << ": " << s.status();
  }
  EXPECT_FALSE(ParseDlrmJson(R"({"kind": "dlrm"})").ok());  // no format
  EXPECT_FALSE(
      ParseDlrmJson(R"({"format": "ferry.model.v1", "kind": "mlp"})").ok());
  EXPECT_FALSE(ParseDlrmJson("{").ok());
  EXPECT_FALSE(ParseDlrmJson("[1]").ok());
  EXPECT_FALSE(IsDlrmJson("{"));
  EXPECT_FALSE(IsDlrmJson(R"({"format": "ferry.model.v1"})"));

  DlrmSpec bad;
  bad.bottom = {16, -1};
  EXPECT_EQ(ValidateDlrmSpec(bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DlrmParameterLayout(bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = DlrmSpec{};
  bad.embedding_dim = 0;
  EXPECT_EQ(ValidateDlrmSpec(bad).code(), absl::StatusCode::kInvalidArgument);
}

TEST(DlrmSpecTest, ResolvesPresetFileAndDirectory) {
  InMemoryFileSystem fs;
  DlrmSpec s;
  s.num_fields = 3;
  ASSERT_TRUE(fs.WriteFileAtomically("/m/model.json", DlrmToJson(s)).ok());
  ASSERT_TRUE(
      fs.WriteFileAtomically("/bad.json", R"({"format": "ferry.model.v1",
        "kind": "dlrm", "top": [0]})")
          .ok());
  EXPECT_EQ(*ResolveDlrmSpec("dlrm", &fs), DlrmSpec{});
  EXPECT_EQ(*ResolveDlrmSpec("/m/model.json", &fs), s);
  EXPECT_EQ(*ResolveDlrmSpec("/m", &fs), s);
  const absl::Status bad = ResolveDlrmSpec("/bad.json", &fs).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("/bad.json"), std::string::npos) << bad;
  EXPECT_NE(bad.message().find("top[0]"), std::string::npos) << bad;
  EXPECT_EQ(ResolveDlrmSpec("/nothing", &fs).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(DlrmSpecTest, SequentialParsersPointAtDlrm) {
  const absl::Status json = ParseModelJson(DlrmToJson(DlrmSpec{})).status();
  EXPECT_EQ(json.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(json.message().find("DLRM"), std::string::npos) << json;
  InMemoryFileSystem fs;
  const absl::Status preset = ResolveModelSpec("dlrm", &fs).status();
  EXPECT_EQ(preset.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(preset.message().find("ResolveDlrmSpec"), std::string::npos)
      << preset;
}

}  // namespace
}  // namespace ferry

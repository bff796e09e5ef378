#include "model/model_export.h"

#include <string>

#include "common/file_system.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/model_params.h"
#include "model/model_presets.h"
#include "model/safetensors.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

// A small model with every kind of tensor: conv, BatchNorm state, linear.
ModelDef SmallNet() {
  auto def = ParseModelJson(R"({"format": "ferry.model.v1",
    "input": {"shape": [1, 6, 6], "scale": 0.5, "mean": 0.1, "std": 2},
    "classes": 3, "layers": [
      {"type": "Conv2d", "args": {"in_channels": 1, "out_channels": 2,
                                  "kernel_size": 3}},
      {"type": "BatchNorm2d", "args": {"num_features": 2}},
      {"type": "ReLU"},
      {"type": "Flatten"},
      {"type": "Linear", "args": {"in_features": 32, "out_features": 3}}]})");
  EXPECT_TRUE(def.ok()) << def.status();
  return *def;
}

ModelValues Values(const ModelDef& def) {
  ModelValues v;
  v.def = def;
  const ParameterLayout params = *ModelParameterLayout(def);
  const ParameterLayout state = *ModelStateLayout(def);
  v.params = ModelInitialParameters(def, params, /*seed=*/7);
  v.state = ModelInitialState(def, state);
  for (size_t i = 0; i < v.state.size(); ++i) v.state[i] += 0.25f * i;
  return v;
}

TEST(ModelExportTest, RoundTripKeepsDefParametersAndState) {
  InMemoryFileSystem fs;
  const ModelValues v = Values(SmallNet());
  ASSERT_TRUE(ExportModel("out/m", v, &fs).ok());
  auto back = ImportModel("out/m", &fs);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->def, v.def);
  EXPECT_EQ(back->params, v.params);
  EXPECT_EQ(back->state, v.state);
}

TEST(ModelExportTest, WeightsFileHasPyTorchNamesShapesAndDtypes) {
  InMemoryFileSystem fs;
  ASSERT_TRUE(ExportModel("m", Values(SmallNet()), &fs).ok());
  auto file = DecodeSafetensors(*fs.ReadFile("m/model.safetensors"));
  ASSERT_TRUE(file.ok()) << file.status();
  std::vector<std::string> names;
  for (const SafetensorsTensor& t : file->tensors) names.push_back(t.name);
  // nn.Sequential(...).state_dict() order.
  EXPECT_THAT(names, ::testing::ElementsAre(
                         "0.weight", "0.bias", "1.weight", "1.bias",
                         "1.running_mean", "1.running_var",
                         "1.num_batches_tracked", "4.weight", "4.bias"));
  EXPECT_EQ(file->tensors[0].shape, (std::vector<int64_t>{2, 1, 3, 3}));
  EXPECT_EQ(file->tensors[6].dtype, SafetensorsDtype::kI64);
  EXPECT_TRUE(file->tensors[6].shape.empty());
  EXPECT_EQ(file->tensors[7].shape, (std::vector<int64_t>{3, 32}));
  auto json = fs.ReadFile("m/model.json");
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(*ParseModelJson(*json), SmallNet());
}

TEST(ModelExportTest, ImportNamesTheFirstDifference) {
  InMemoryFileSystem fs;
  ModelValues v = Values(SmallNet());
  ASSERT_TRUE(ExportModel("m", v, &fs).ok());
  auto file = *DecodeSafetensors(*fs.ReadFile("m/model.safetensors"));

  SafetensorsFile missing = file;
  missing.tensors.erase(missing.tensors.begin() + 4);  // 1.running_mean
  ASSERT_TRUE(
      fs.WriteFileAtomically("m/model.safetensors", *EncodeSafetensors(missing))
          .ok());
  EXPECT_THAT(ImportModel("m", &fs).status().message(),
              HasSubstr("tensor '1.running_mean' [2] of the model is missing"));

  SafetensorsFile extra = file;
  extra.tensors.push_back({"9.weight", {1}, SafetensorsDtype::kF32, {1}});
  ASSERT_TRUE(
      fs.WriteFileAtomically("m/model.safetensors", *EncodeSafetensors(extra))
          .ok());
  EXPECT_THAT(ImportModel("m", &fs).status().message(),
              HasSubstr("tensor '9.weight' is not a tensor of the model"));

  SafetensorsFile shape = file;
  shape.tensors[7].shape = {32, 3};
  ASSERT_TRUE(
      fs.WriteFileAtomically("m/model.safetensors", *EncodeSafetensors(shape))
          .ok());
  EXPECT_THAT(
      ImportModel("m", &fs).status().message(),
      HasSubstr("'4.weight' has shape [32, 3], the model's is [3, 32]"));

  SafetensorsFile nan = file;
  nan.tensors[0].values[3] = std::nanf("");
  ASSERT_TRUE(
      fs.WriteFileAtomically("m/model.safetensors", *EncodeSafetensors(nan))
          .ok());
  EXPECT_THAT(ImportModel("m", &fs).status().message(),
              HasSubstr("'0.weight' holds a non-finite value at element 3"));

  EXPECT_EQ(ImportModel("nowhere", &fs).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ModelExportTest, CheckSameModelNamesTheLayer) {
  const ModelDef a = SmallNet();
  EXPECT_TRUE(CheckSameModel(a, a).ok());
  ModelDef b = a;
  b.input.mean = 0.5;  // normalization may differ
  EXPECT_TRUE(CheckSameModel(a, b).ok());
  b.layers[4].out_features = 4;
  b.classes = 4;
  EXPECT_THAT(CheckSameModel(a, b).message(), HasSubstr("4 classes"));
  b.classes = 3;
  EXPECT_THAT(CheckSameModel(a, b).message(),
              HasSubstr("layer 4 differs: the job's is"));
  EXPECT_THAT(CheckSameModel(*ResolveModelSpec("mlp"), a).message(),
              HasSubstr("input is [1, 6, 6], the job's is [784]"));
}

}  // namespace
}  // namespace ferry

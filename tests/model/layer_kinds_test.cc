#include "model/layer_kinds.h"

#include <string>
#include <vector>

#include "compute/cpu_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/model_def.h"
#include "model/model_params.h"
#include "model/sequential_model.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Names() {
  std::vector<std::string> names;
  for (const LayerKind* kind : LayerKinds()) names.push_back(kind->name);
  return names;
}

TEST(LayerKindsTest, ListsTheBuiltInKindsInOrder) {
  const std::vector<std::string> names = Names();
  ASSERT_GE(names.size(), 9u);
  EXPECT_THAT(std::vector<std::string>(names.begin(), names.begin() + 9),
              ElementsAre("Linear", "Conv2d", "MaxPool2d", "AvgPool2d", "ReLU",
                          "Dropout", "Flatten", "BatchNorm2d", "BatchNorm1d"));
  for (const LayerKind* kind : LayerKinds()) {
    auto type = ParseLayerType(kind->name);
    ASSERT_TRUE(type.ok()) << type.status();
    EXPECT_EQ(&type->kind(), kind);
    EXPECT_STREQ(LayerTypeName(*type), kind->name);
    EXPECT_NE(kind->output_shape, nullptr) << kind->name;
    EXPECT_NE(kind->make, nullptr) << kind->name;
  }
  EXPECT_EQ(*ParseLayerType("Conv2d"), LayerType::kConv2d);
  EXPECT_STREQ(LayerTypeName(LayerType::kBatchNorm1d), "BatchNorm1d");
}

TEST(LayerKindsTest, UnknownKindNamesTheSupportedOnes) {
  auto type = ParseLayerType("Conv3d");
  ASSERT_FALSE(type.ok());
  EXPECT_EQ(type.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(type.status().message(),
              HasSubstr("unknown layer type 'Conv3d' (supported: Linear, "
                        "Conv2d, MaxPool2d, AvgPool2d, ReLU, Dropout, "
                        "Flatten, BatchNorm2d, BatchNorm1d"));
}

TEST(LayerKindsTest, RefusesADuplicateOrIncompleteKind) {
  LayerKind linear = LayerType::kLinear.kind();
  EXPECT_THAT(RegisterLayerKind(linear).message(),
              HasSubstr("'Linear' is already registered"));
  LayerKind empty;
  empty.name = "Empty";
  EXPECT_EQ(RegisterLayerKind(empty).code(),
            absl::StatusCode::kInvalidArgument);
}

// A kind defined only here: torch.nn.Identity, y = x.
class IdentityLayer final : public Layer {
 public:
  explicit IdentityLayer(const SampleShape& in) : size_(ShapeElements(in)) {}
  absl::Status Forward(const LayerContext& ctx, const float* /*params*/,
                       float* /*state*/, const float* x, float* y) override {
    return ctx.backend->Copy(x, static_cast<size_t>(ctx.batch) * size_, y);
  }
  absl::Status Backward(const LayerContext& ctx, const float* /*params*/,
                        const float* /*x*/, const float* /*y*/, const float* dy,
                        float* dx, float* /*dparams*/) override {
    if (dx == nullptr) return absl::OkStatus();
    return ctx.backend->Copy(dy, static_cast<size_t>(ctx.batch) * size_, dx);
  }

 private:
  int64_t size_;
};

const LayerKind kIdentityKind = {
    .name = "Identity",
    .output_shape = [](const LayerDef&, const SampleShape& in)
        -> absl::StatusOr<SampleShape> { return in; },
    .activation = ActivationRole::kTransparent,
    .make = [](const LayerDef&, int, const SampleShape& in,
               const SampleShape&) -> absl::StatusOr<std::unique_ptr<Layer>> {
      return std::make_unique<IdentityLayer>(in);
    },
};

void RegisterIdentityOnce() {
  static const absl::Status registered = RegisterLayerKind(kIdentityKind);
  ASSERT_TRUE(registered.ok()) << registered;
}

std::string MlpJson(bool with_identity) {
  return std::string(R"({"format": "ferry.model.v1",
      "input": {"shape": [4]}, "classes": 3, "layers": [
        {"type": "Linear", "args": {"in_features": 4, "out_features": 5}},)") +
         (with_identity ? R"({"type": "Identity"},)" : "") +
         R"({"type": "ReLU"},
        {"type": "Linear", "args": {"in_features": 5, "out_features": 3}}]})";
}

// A registered kind is parsed, written, laid out and trained like a
// built-in one without any edit to the model code.
TEST(LayerKindsTest, ARegisteredKindWorksEverywhere) {
  RegisterIdentityOnce();
  EXPECT_THAT(Names(), ::testing::Contains("Identity"));
  auto with = ParseModelJson(MlpJson(true));
  ASSERT_TRUE(with.ok()) << with.status();
  auto without = ParseModelJson(MlpJson(false));
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ(&with->layers[1].type.kind(), &kIdentityKind);
  EXPECT_EQ(*ParseModelJson(ModelToJson(*with)), *with);
  EXPECT_THAT(ModelToJson(*with), HasSubstr("\"type\": \"Identity\""));

  // Same tensors (the Identity has none, so the indices after it shift) and
  // the same He-initialized values: the ReLU is still seen through it.
  auto layout_with = ModelParameterLayout(*with);
  auto layout_without = ModelParameterLayout(*without);
  ASSERT_TRUE(layout_with.ok() && layout_without.ok());
  ASSERT_EQ(layout_with->total_elements(), layout_without->total_elements());
  EXPECT_EQ(layout_with->tensors()[2].name, "3.weight");
  const std::vector<float> params =
      ModelInitialParameters(*with, *layout_with, 7);
  EXPECT_EQ(params, ModelInitialParameters(*without, *layout_without, 7));

  auto backend = MakeCpuBackend(1);
  auto model_with = SequentialModel::Create(*with, backend.get());
  ASSERT_TRUE(model_with.ok()) << model_with.status();
  auto model_without = SequentialModel::Create(*without, backend.get());
  ASSERT_TRUE(model_without.ok()) << model_without.status();
  const std::vector<float> inputs = {0.5f, -1.0f, 2.0f,  0.25f,
                                     1.0f, 0.0f,  -0.5f, 3.0f};
  const std::vector<int32_t> labels = {2, 0};
  std::vector<float> grads_with(params.size()), grads_without(params.size());
  auto loss_with = model_with->ForwardBackward(
      params.data(), inputs.data(), labels.data(), 2, 1.0f, grads_with.data());
  auto loss_without = model_without->ForwardBackward(
      params.data(), inputs.data(), labels.data(), 2, 1.0f,
      grads_without.data());
  ASSERT_TRUE(loss_with.ok() && loss_without.ok());
  EXPECT_EQ(loss_with->loss_sum, loss_without->loss_sum);
  EXPECT_EQ(grads_with, grads_without);
}

TEST(LayerKindsTest, ShapeErrorsArePrefixedWithTheLayer) {
  auto def = ParseModelJson(R"({"format": "ferry.model.v1",
      "input": {"shape": [4]}, "classes": 3, "layers": [
        {"type": "Linear", "args": {"in_features": 6, "out_features": 3}}]})");
  ASSERT_FALSE(def.ok());
  EXPECT_THAT(def.status().message(),
              HasSubstr("layer 0 (Linear): in_features is 6 but its input "
                        "has 4 features"));
}

}  // namespace
}  // namespace ferry

#include "model/model_spec.h"

#include "compute/cpu_backend.h"
#include "gtest/gtest.h"
#include "model/mlp.h"

namespace ferry {
namespace {

TEST(MlpLayout, NamesAndShapesEveryTensor) {
  auto layout = MlpLayout({784, 256, 10});
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->TensorSizes(),
            (std::vector<int64_t>{256 * 784, 256, 10 * 256, 10}));
  ASSERT_EQ(layout->tensors().size(), 4u);
  EXPECT_EQ(layout->tensors()[0].name, "fc0.weight");
  EXPECT_EQ(layout->tensors()[3].name, "fc1.bias");
  EXPECT_EQ(layout->total_elements(), 256 * 784 + 256 + 10 * 256 + 10);
}

TEST(MlpLayout, RefusesBadSizes) {
  EXPECT_EQ(MlpLayout({784}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MlpLayout({784, 0, 10}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MlpLayout({}).status().code(), absl::StatusCode::kInvalidArgument);
}

// Servers get initial weights without a backend; they must be the very
// parameters a worker's model starts from.
TEST(MlpInitialParameters, EqualTheModelsOwnWithoutABackend) {
  const std::vector<int> sizes = {13, 7, 3};
  auto layout = MlpLayout(sizes);
  ASSERT_TRUE(layout.ok());
  const std::vector<float> pure = MlpInitialParameters(sizes, *layout, 42);
  auto backend = MakeCpuBackend(1);
  auto mlp = Mlp::Create(sizes, backend.get());
  ASSERT_TRUE(mlp.ok());
  EXPECT_EQ(pure, mlp->InitialParameters(42));
  EXPECT_NE(pure, MlpInitialParameters(sizes, *layout, 43));
  // Biases start at zero.
  const TensorSlot& bias = layout->tensors()[1];
  for (int64_t i = 0; i < bias.numel; ++i) {
    EXPECT_EQ(pure[bias.offset + i], 0.0f);
  }
}

}  // namespace
}  // namespace ferry

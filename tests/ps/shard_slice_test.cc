#include "ps/shard_slice.h"

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "compute/cpu_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Momentum SGD (lr 0.5, momentum 0: one state buffer, param -= 0.5 * g)
// over a slice of {1, 2}.
std::unique_ptr<ShardSlice> TestSlice() {
  std::unique_ptr<ComputeBackend> backend = MakeCpuBackend(1);
  OptimizerConfig config;
  config.kind = OptimizerKind::kMomentum;
  config.lr = 0.5;
  config.momentum = 0.0;
  auto optimizer = Optimizer::Create(config, backend.get(), 2);
  EXPECT_TRUE(optimizer.ok()) << optimizer.status();
  return std::make_unique<ShardSlice>(4, std::move(backend),
                                      std::move(optimizer).value(),
                                      std::vector<float>{1.0f, 2.0f});
}

TEST(ShardSliceTest, ApplyUpdatesTheSliceAndBumpsTheVersion) {
  auto slice = TestSlice();
  EXPECT_EQ(slice->version(), 0);
  const std::vector<float> grad = {2.0f, 4.0f};
  ASSERT_TRUE(slice->Apply(grad.data()).ok());
  EXPECT_EQ(slice->version(), 1);
  EXPECT_EQ(slice->snapshot()->version, 1);
  EXPECT_THAT(slice->snapshot()->values, ElementsAre(0.0f, 0.0f));
}

TEST(ShardSliceTest, ASnapshotHeldIsNeverWrittenAndItsMemoryIsReused) {
  auto slice = TestSlice();
  const std::vector<float> grad = {2.0f, 2.0f};
  std::shared_ptr<const PsSnapshot> v0 = slice->snapshot();
  const float* v0_memory = v0->values.data();
  ASSERT_TRUE(slice->Apply(grad.data()).ok());
  EXPECT_EQ(v0->version, 0);
  EXPECT_THAT(v0->values, ElementsAre(1.0f, 2.0f));
  EXPECT_NE(slice->snapshot()->values.data(), v0_memory);  // copied on write
  v0.reset();
  // Held again: the next copy goes into version 0's memory, free now.
  std::shared_ptr<const PsSnapshot> v1 = slice->snapshot();
  ASSERT_TRUE(slice->Apply(grad.data()).ok());
  EXPECT_THAT(v1->values, ElementsAre(0.0f, 1.0f));
  EXPECT_EQ(slice->snapshot()->values.data(), v0_memory);
  EXPECT_THAT(slice->snapshot()->values, ElementsAre(-1.0f, 0.0f));
  v1.reset();
  // Not held: written in place.
  const float* v2_memory = slice->snapshot()->values.data();
  ASSERT_TRUE(slice->Apply(grad.data()).ok());
  EXPECT_EQ(slice->snapshot()->values.data(), v2_memory);
}

TEST(ShardSliceTest, FillViewReadsTheStateInPlace) {
  auto slice = TestSlice();
  const std::vector<float> grad = {2.0f, 2.0f};
  ASSERT_TRUE(slice->Apply(grad.data()).ok());
  PsShardStateView view;
  ASSERT_TRUE(slice->FillView(view).ok());
  EXPECT_EQ(view.version, 1);
  EXPECT_EQ(view.optimizer_steps, 1);
  EXPECT_EQ(view.params.data(), slice->snapshot()->values.data());
  ASSERT_EQ(view.optimizer_state.size(), 1u);
  EXPECT_THAT(view.optimizer_state[0], ElementsAre(2.0f, 2.0f));
  EXPECT_TRUE(view.host_copies.empty());  // a host-memory backend
}

TEST(ShardSliceTest, CheckVersion) {
  auto slice = TestSlice();
  EXPECT_TRUE(slice->CheckVersion(-1).ok());
  EXPECT_TRUE(slice->CheckVersion(0).ok());
  absl::Status other = slice->CheckVersion(3);
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(other.message(), HasSubstr("shard 4 is at version 0, not 3"));
}

TEST(ShardSliceTest, CheckStateRefusesAnotherShapeOrBadValues) {
  auto slice = TestSlice();
  const PsShardState good{7, 3, {5.0f, 6.0f}, {{0.5f, 0.5f}}, {}};
  EXPECT_TRUE(slice->CheckState(good).ok());
  PsShardState bad = good;
  bad.version = -1;
  EXPECT_EQ(slice->CheckState(bad).code(), absl::StatusCode::kInvalidArgument);
  bad = good;
  bad.params = {1.0f};
  EXPECT_EQ(slice->CheckState(bad).code(),
            absl::StatusCode::kFailedPrecondition);
  bad = good;
  bad.optimizer_state.clear();
  EXPECT_EQ(slice->CheckState(bad).code(),
            absl::StatusCode::kFailedPrecondition);
  bad = good;
  bad.optimizer_state[0] = {1.0f};
  EXPECT_EQ(slice->CheckState(bad).code(),
            absl::StatusCode::kFailedPrecondition);
  bad = good;
  bad.params[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(slice->CheckState(bad).code(), absl::StatusCode::kInvalidArgument);
  bad = good;
  bad.optimizer_state[0][0] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(slice->CheckState(bad).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ShardSliceTest, RestoreReplacesTheStateWithoutWritingASnapshotHeld) {
  auto slice = TestSlice();
  std::shared_ptr<const PsSnapshot> held = slice->snapshot();
  const PsShardState state{7, 3, {5.0f, 6.0f}, {{0.5f, 0.5f}}, {}};
  ASSERT_TRUE(slice->Restore(state).ok());
  EXPECT_THAT(held->values, ElementsAre(1.0f, 2.0f));
  EXPECT_EQ(slice->version(), 7);
  EXPECT_EQ(slice->snapshot()->version, 7);
  EXPECT_THAT(slice->snapshot()->values, ElementsAre(5.0f, 6.0f));
  PsShardStateView view;
  ASSERT_TRUE(slice->FillView(view).ok());
  EXPECT_EQ(view.optimizer_steps, 3);
  EXPECT_THAT(view.optimizer_state[0], ElementsAre(0.5f, 0.5f));
}

}  // namespace
}  // namespace ferry

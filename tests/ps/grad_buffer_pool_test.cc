#include "ps/grad_buffer_pool.h"

#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

TEST(GradBufferPoolTest, EmptyPoolHandsOutNothing) {
  GradBufferPool pool(4);
  EXPECT_FALSE(pool.TakeFree().has_value());
}

TEST(GradBufferPoolTest, KeepsOnlyBuffersOfItsSize) {
  GradBufferPool pool(4);
  pool.Recycle(std::vector<float>(3));
  pool.Recycle({});  // an empty one
  EXPECT_EQ(pool.free_buffers(), 0u);
  std::vector<float> buffer(4, 2.0f);
  const float* memory = buffer.data();
  pool.Recycle(std::move(buffer));
  ASSERT_EQ(pool.free_buffers(), 1u);
  std::optional<std::vector<float>> taken = pool.TakeFree();
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->data(), memory);  // the same memory, reused
  EXPECT_EQ(pool.free_buffers(), 0u);
}

TEST(GradBufferPoolTest, KeepsAtMostMaxFree) {
  GradBufferPool pool(2);
  for (size_t i = 0; i < GradBufferPool::kMaxFree + 3; ++i) {
    pool.Recycle(std::vector<float>(2));
  }
  EXPECT_EQ(pool.free_buffers(), GradBufferPool::kMaxFree);
}

}  // namespace
}  // namespace ferry

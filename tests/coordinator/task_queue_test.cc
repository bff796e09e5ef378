#include "coordinator/task_queue.h"

#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

TEST(EpochTaskQueueTest, LeasesInOrderThenReleasedFirst) {
  EpochTaskQueue q(3, 10);
  auto a = q.Lease(4);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].begin(), 0);
  EXPECT_EQ(a[0].end(), 4);
  EXPECT_EQ(a[0].epoch(), 3);
  auto b = q.Lease(4);
  ASSERT_TRUE(q.Release(a[0].task_id()).ok());
  EXPECT_EQ(q.remaining(), 6);
  // Released [0,4) comes back first, then the cursor continues at 8.
  auto c = q.Lease(5);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].begin(), 0);
  EXPECT_EQ(c[0].end(), 4);
  EXPECT_EQ(c[1].begin(), 8);
  EXPECT_EQ(c[1].end(), 9);
  EXPECT_EQ(q.samples_released(), 4);
}

TEST(EpochTaskQueueTest, EveryPositionAppliedExactlyOnceUnderChurn) {
  for (int64_t n : {0, 1, 7, 1000}) {
    EpochTaskQueue q(0, n);
    std::vector<int> applied(n, 0);
    int round = 0;
    while (!q.complete()) {
      auto tasks = q.Lease(3);
      ASSERT_FALSE(tasks.empty()) << "nothing leasable but not complete";
      for (const auto& t : tasks) {
        if (++round % 3 == 0) {
          ASSERT_TRUE(q.Release(t.task_id()).ok());  // a worker died
        } else {
          ASSERT_TRUE(q.Applied(t.task_id()).ok());
          for (int64_t i = t.begin(); i < t.end(); ++i) ++applied[i];
        }
      }
    }
    for (int64_t i = 0; i < n; ++i)
      EXPECT_EQ(applied[i], 1) << "position " << i;
    EXPECT_EQ(q.samples_applied(), n);
  }
}

TEST(EpochTaskQueueTest, UnknownOrFinishedTaskIsNotFound) {
  EpochTaskQueue q(0, 5);
  auto t = q.Lease(5);
  ASSERT_TRUE(q.Applied(t[0].task_id()).ok());
  EXPECT_EQ(q.Applied(t[0].task_id()).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(q.Release(t[0].task_id()).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(q.Release(99).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(q.complete());
}

}  // namespace
}  // namespace ferry

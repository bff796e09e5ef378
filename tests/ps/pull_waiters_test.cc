#include "ps/pull_waiters.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

using Result = absl::StatusOr<std::shared_ptr<const PsSnapshot>>;

TEST(PullWaitersTest, IdsCountUpFromOne) {
  PullWaiters waiters;
  auto first = waiters.Add(
      1, [](Result) {}, 10);
  auto second = waiters.Add(
      1, [](Result) {}, 10);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(*first, 1u);
  EXPECT_EQ(*second, 2u);
  EXPECT_NE(*first, kNoPullWait);
  EXPECT_EQ(waiters.size(), 2);
}

TEST(PullWaitersTest, AddRefusesBeyondTheLimitWithoutCalling) {
  PullWaiters waiters;
  ASSERT_TRUE(waiters
                  .Add(
                      1, [](Result) {}, 1)
                  .ok());
  bool called = false;
  auto refused = waiters.Add(
      1, [&](Result) { called = true; }, 1);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(called);
  EXPECT_EQ(waiters.size(), 1);
}

TEST(PullWaitersTest, TakeReadyMovesOnlyWaitsUpToTheVersion) {
  PullWaiters waiters;
  std::vector<int64_t> seen;
  for (int64_t v : {1, 2, 3}) {
    ASSERT_TRUE(waiters
                    .Add(
                        v,
                        [&seen, v](Result r) {
                          ASSERT_TRUE(r.ok());
                          EXPECT_EQ((*r)->version, 2);
                          seen.push_back(v);
                        },
                        10)
                    .ok());
  }
  auto snapshot = std::make_shared<const PsSnapshot>(PsSnapshot{2, {1.0f}});
  PullWaiters::ReadyList ready;
  waiters.TakeReady(2, snapshot, ready);
  EXPECT_TRUE(seen.empty());  // taken, not called
  ASSERT_EQ(ready.size(), 2u);
  for (auto& [callback, snap] : ready) {
    EXPECT_EQ(snap, snapshot);
    callback(snap);
  }
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_EQ(waiters.size(), 1);
}

TEST(PullWaitersTest, CancelForgetsOnce) {
  PullWaiters waiters;
  auto id = waiters.Add(
      5, [](Result) {}, 10);
  ASSERT_TRUE(id.ok());
  EXPECT_TRUE(waiters.Cancel(*id));
  EXPECT_FALSE(waiters.Cancel(*id));
  EXPECT_EQ(waiters.size(), 0);
}

TEST(PullWaitersTest, TakeAllAndShutDown) {
  PullWaiters waiters;
  ASSERT_TRUE(waiters
                  .Add(
                      5, [](Result) {}, 10)
                  .ok());
  std::vector<PullWaiters::ReadyCallback> taken;
  waiters.TakeAll(taken);
  EXPECT_EQ(taken.size(), 1u);
  EXPECT_FALSE(waiters.shut_down());
  ASSERT_TRUE(waiters
                  .Add(
                      6, [](Result) {}, 10)
                  .ok());
  waiters.ShutDown(taken);
  EXPECT_EQ(taken.size(), 2u);
  EXPECT_EQ(waiters.size(), 0);
  EXPECT_TRUE(waiters.shut_down());
}

}  // namespace
}  // namespace ferry

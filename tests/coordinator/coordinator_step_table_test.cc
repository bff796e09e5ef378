// StepTable on its own: dense numbering, the quorum rule, committed steps,
// aborts and the finalizer's queue.
#include "absl/strings/str_cat.h"
#include "coordinator/step_table.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

OpenStep Step(int slots) {
  OpenStep step;
  for (int i = 0; i < slots; ++i) {
    StepSlot slot;
    slot.worker_id = absl::StrCat("w", i);
    step.slots.push_back(slot);
  }
  return step;
}

TEST(CoordinatorStepTableTest, StepsAreNumberedDensely) {
  StepTable table;
  EXPECT_EQ(table.Add(Step(1)).step, 0);
  EXPECT_EQ(table.Add(Step(1)).step, 1);
  EXPECT_EQ(table.formed(), 2);
  EXPECT_EQ(table.Collecting(), 2);
  ASSERT_NE(table.Find(1), nullptr);
  EXPECT_EQ(table.Find(2), nullptr);
}

TEST(CoordinatorStepTableTest, AStepClosesWhenEverySlotOrTheQuorumPushed) {
  StepTable table;
  OpenStep& all = table.Add(Step(3));
  all.slots[0].pushed = all.slots[1].pushed = true;
  EXPECT_FALSE(table.QueueIfReady(all, /*quorum=*/0));
  all.slots[2].pushed = true;
  EXPECT_TRUE(table.QueueIfReady(all, 0));
  EXPECT_FALSE(table.QueueIfReady(all, 0));  // closed once
  OpenStep& quorum = table.Add(Step(3));
  quorum.slots[1].pushed = true;
  EXPECT_FALSE(table.QueueIfReady(quorum, 2));
  quorum.slots[2].pushed = true;
  EXPECT_TRUE(table.QueueIfReady(quorum, 2));
  OpenStep& small = table.Add(Step(1));  // a quorum above the slots
  small.slots[0].pushed = true;
  EXPECT_TRUE(table.QueueIfReady(small, 5));
  OpenStep& empty = table.Add(Step(0));
  EXPECT_FALSE(table.QueueIfReady(empty, 0));
  EXPECT_EQ(table.Collecting(), 1);
}

TEST(CoordinatorStepTableTest, RemoveFromKeepsClosedStepsUnlessAsked) {
  StepTable table;
  for (int i = 0; i < 4; ++i) table.Add(Step(1));
  table.Find(1)->slots[0].pushed = true;
  table.QueueIfReady(*table.Find(1), 0);
  std::vector<OpenStep> removed = table.RemoveFrom(1, false);
  ASSERT_EQ(removed.size(), 2u);
  EXPECT_EQ(removed[0].step, 2);
  EXPECT_EQ(removed[1].step, 3);
  EXPECT_NE(table.Find(1), nullptr);
  removed = table.RemoveFrom(0, true);
  ASSERT_EQ(removed.size(), 2u);
  EXPECT_TRUE(table.open().empty());
  // The step's queue entry went with it.
  EXPECT_TRUE(table.queue_empty());
}

TEST(CoordinatorStepTableTest, QueueHandsOutTheLowestEntryFirst) {
  StepTable table;
  for (int i = 0; i < 3; ++i) table.Add(Step(1));
  for (int i : {2, 0}) {
    table.Find(i)->slots[0].pushed = true;
    table.QueueIfReady(*table.Find(i), 0);
  }
  EXPECT_EQ(table.NextQueued(), 0);
  table.Dequeue(0);
  table.Dequeue(7);  // not queued: nothing happens
  EXPECT_EQ(table.NextQueued(), 2);
}

}  // namespace
}  // namespace ferry

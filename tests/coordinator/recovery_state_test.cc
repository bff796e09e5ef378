// RecoveryState on its own: the fence, the generation the shards were
// sent, the step in doubt, the recovery flag and a restart from the state.
#include "coordinator/recovery_state.h"

#include "gtest/gtest.h"

namespace ferry {
namespace {

TEST(CoordinatorRecoveryStateTest, FenceAndTheShardsGeneration) {
  RecoveryState r;
  EXPECT_EQ(r.fence(), 0);
  r.RaiseFence();
  r.RaiseFence();
  EXPECT_EQ(r.fence(), 2);
  EXPECT_FALSE(r.FenceDue(0));
  EXPECT_TRUE(r.FenceDue(3));
  r.Fenced(3);
  EXPECT_FALSE(r.FenceDue(3));
  r.Fenced(1);  // an older one changes nothing
  EXPECT_TRUE(r.FenceDue(4));
  EXPECT_FALSE(r.FenceDue(3));
}

TEST(CoordinatorRecoveryStateTest, RequireKeepsOrReplacesTheReason) {
  RecoveryState r;
  EXPECT_FALSE(r.needed());
  EXPECT_EQ(r.why(), "the coordinator restarted");
  r.Require("step 3 aborted");
  EXPECT_TRUE(r.needed());
  EXPECT_EQ(r.why(), "step 3 aborted");
  r.Done();
  EXPECT_FALSE(r.needed());
  r.Require();
  EXPECT_TRUE(r.needed());
  EXPECT_EQ(r.why(), "step 3 aborted");
}

TEST(CoordinatorRecoveryStateTest, ARestartRaisesTheFenceAndNeedsRecovery) {
  RecoveryState r;
  r.RaiseFence();
  r.CountAborted(3);
  r.CountRollback();
  v1::AppliedStep doubt;
  doubt.set_step(7);
  doubt.add_tasks()->set_task_id(4);
  r.SetInDoubt(doubt);
  v1::CoordinatorState state;
  r.SaveTo(state);
  EXPECT_EQ(state.fence(), 1);
  EXPECT_EQ(state.in_doubt().step(), 7);

  RecoveryState loaded;
  loaded.LoadFrom(state);
  EXPECT_EQ(loaded.fence(), 2);  // above every fence handed out
  EXPECT_TRUE(loaded.needed());
  EXPECT_EQ(loaded.why(), "the coordinator restarted");
  ASSERT_TRUE(loaded.in_doubt().has_value());
  EXPECT_EQ(loaded.in_doubt()->tasks(0).task_id(), 4);
  EXPECT_EQ(loaded.restarts(), 1);
  v1::StatusResponse status;
  loaded.FillStatus(status);
  EXPECT_EQ(status.aborted_steps(), 3);
  EXPECT_EQ(status.rollbacks(), 1);
  EXPECT_EQ(status.restarts(), 1);

  loaded.ClearInDoubt();
  v1::CoordinatorState again;
  loaded.SaveTo(again);
  EXPECT_FALSE(again.has_in_doubt());
  RecoveryState twice;
  twice.LoadFrom(again);
  EXPECT_EQ(twice.restarts(), 2);
}

}  // namespace
}  // namespace ferry

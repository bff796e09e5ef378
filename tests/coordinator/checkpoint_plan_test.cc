// CheckpointPlan on its own: which versions are checkpointed, which steps'
// leases must leave the shards at their version, and forced checkpoints.
#include "coordinator/checkpoint_plan.h"

#include "gtest/gtest.h"

namespace ferry {
namespace {

TEST(CoordinatorCheckpointPlanTest, DueEveryNStepsAtEpochEndsAndAsync) {
  const CheckpointPlan plan(/*on=*/true, /*every=*/3);
  EXPECT_TRUE(plan.Due(3, false, false));
  EXPECT_TRUE(plan.Due(6, false, false));
  EXPECT_FALSE(plan.Due(4, false, false));
  EXPECT_TRUE(plan.Due(4, /*epoch_end=*/true, false));
  EXPECT_TRUE(plan.Due(4, false, /*forced=*/true));
  EXPECT_TRUE(plan.DueAfterTasks(9));
  EXPECT_FALSE(plan.DueAfterTasks(10));

  const CheckpointPlan epochs_only(true, 0);
  EXPECT_FALSE(epochs_only.Due(3, false, false));
  EXPECT_TRUE(epochs_only.Due(3, true, false));
  EXPECT_FALSE(epochs_only.DueAfterTasks(3));
}

TEST(CoordinatorCheckpointPlanTest, OffMeansNeverUnlessAForcedStepIsKnown) {
  CheckpointPlan plan(true, 2);
  plan.TurnOff();
  EXPECT_FALSE(plan.on());
  EXPECT_FALSE(plan.Due(2, true, true));
  EXPECT_FALSE(plan.DueAfterTasks(2));
  EXPECT_FALSE(plan.AtStep(2));
  EXPECT_FALSE(plan.KeepsState(2, true));
  const CheckpointPlan no_shards(false, 2);
  EXPECT_FALSE(no_shards.Due(2, true, false));
  EXPECT_FALSE(no_shards.ForcedAt(2));
}

TEST(CoordinatorCheckpointPlanTest,
     TheCoordinatorCheckpointsPositiveMultiples) {
  const CheckpointPlan plan(true, 4);
  EXPECT_FALSE(plan.AtStep(0));
  EXPECT_FALSE(plan.AtStep(3));
  EXPECT_TRUE(plan.AtStep(4));
  EXPECT_TRUE(plan.AtStep(8));
  EXPECT_FALSE(CheckpointPlan(true, 0).AtStep(4));
}

TEST(CoordinatorCheckpointPlanTest, MembersKeepStateAtCheckpointVersions) {
  const CheckpointPlan plan(true, 4);
  EXPECT_TRUE(plan.KeepsState(0, false));
  EXPECT_TRUE(plan.KeepsState(8, false));
  EXPECT_FALSE(plan.KeepsState(5, false));
  EXPECT_TRUE(plan.KeepsState(5, /*epoch_start=*/true));
}

TEST(CoordinatorCheckpointPlanTest, AForcedCheckpointFollowsItsStep) {
  CheckpointPlan plan(true, 0);
  EXPECT_FALSE(plan.forcing());
  EXPECT_FALSE(plan.ForcedAt(5));
  plan.ForceNext();
  EXPECT_TRUE(plan.forcing());
  EXPECT_TRUE(plan.ForcedAt(5));  // whichever step forms next
  EXPECT_TRUE(plan.KeepsState(5, false));
  plan.MarkForced(5);
  EXPECT_TRUE(plan.forcing());     // on its way
  EXPECT_TRUE(plan.ForcedAt(5));   // step 5 formed again
  EXPECT_FALSE(plan.ForcedAt(6));  // asked for once
  EXPECT_TRUE(plan.AtStep(5));     // its leases name no set
  EXPECT_FALSE(plan.TakeForced(6));
  EXPECT_TRUE(plan.TakeForced(5));
  EXPECT_FALSE(plan.TakeForced(5));
  EXPECT_FALSE(plan.forcing());
  EXPECT_FALSE(plan.AtStep(5));
}

}  // namespace
}  // namespace ferry

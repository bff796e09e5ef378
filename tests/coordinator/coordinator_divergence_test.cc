// A worker whose step diverged (StepReport.diverged) stops the job: its
// status error and event say why at once, every further lease is refused
// with that reason, and nothing of the step is counted.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

TEST(CoordinatorDivergenceTest, ADivergedStepStopsTheJobWithItsReason) {
  Fixture f(Job(4, 2), 8);
  const std::string a = f.Join();
  const std::string b = f.Join();
  auto lease_a = Next(f, a);
  auto lease_b = Next(f, b);
  ASSERT_TRUE(lease_a.ok() && lease_b.ok());
  ASSERT_EQ(lease_a->step(), lease_b->step());
  v1::StepReport diverged;
  diverged.set_step(lease_a->step());
  diverged.set_fence(lease_a->fence());
  // An oversized reason is refused and changes nothing.
  diverged.set_diverged(std::string(1001, 'x'));
  EXPECT_EQ(Next(f, a, &diverged).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f.coordinator->Status().error(), "");
  diverged.set_diverged("the loss over its 2 samples is not finite (nan)");
  const absl::StatusOr<v1::NextTaskResponse> after = Next(f, a, &diverged);
  EXPECT_EQ(after.status().code(), absl::StatusCode::kFailedPrecondition);
  const v1::StatusResponse s = f.coordinator->Status();
  EXPECT_THAT(s.error(), HasSubstr("training diverged at step 0"));
  EXPECT_THAT(s.error(), HasSubstr("not finite"));
  EXPECT_THAT(s.error(), HasSubstr(a));
  EXPECT_EQ(CountJobEvents(s, "diverged"), 1);
  EXPECT_EQ(s.step(), 0);  // nothing applied
  // The other worker's report of the step is taken, but it gets no lease.
  const v1::StepReport done_b = Done(*lease_b);
  const absl::StatusOr<v1::NextTaskResponse> refused = Next(f, b, &done_b);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("training diverged"));
  // A second diverged report does not replace the first reason.
  diverged.set_diverged("another reason");
  (void)Next(f, b, &diverged);
  EXPECT_EQ(CountJobEvents(f.coordinator->Status(), "diverged"), 1);
  EXPECT_THAT(f.coordinator->Status().error(), HasSubstr("not finite"));
}

}  // namespace
}  // namespace ferry

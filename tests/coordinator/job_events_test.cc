// JobEvents on its own: what an event records, the bound on the log, and
// its round trip through the state file.
#include "coordinator/job_events.h"

#include "gtest/gtest.h"

namespace ferry {
namespace {

TEST(CoordinatorJobEventsTest, RecordsTheEventAtTheGivenTime) {
  JobEvents events;
  const absl::Time now = absl::FromUnixSeconds(1000);
  events.Add(now, "joined", "w0", 3, 0, "host pid 7");
  events.Add(now + absl::Seconds(2), "step_aborted", "", 4, 16, "why");
  ASSERT_EQ(events.events().size(), 2u);
  const v1::JobEvent& joined = events.events()[0];
  EXPECT_EQ(joined.unix_seconds(), 1000.0);
  EXPECT_EQ(joined.kind(), "joined");
  EXPECT_EQ(joined.worker_id(), "w0");
  EXPECT_EQ(joined.step(), 3);
  EXPECT_EQ(joined.detail(), "host pid 7");
  const v1::JobEvent& aborted = events.events()[1];
  EXPECT_EQ(aborted.unix_seconds(), 1002.0);
  EXPECT_EQ(aborted.samples_lost(), 16);
  EXPECT_TRUE(aborted.worker_id().empty());
}

TEST(CoordinatorJobEventsTest, KeepsTheNewestEvents) {
  JobEvents events;
  const absl::Time now = absl::UnixEpoch();
  for (int64_t i = 0; i < static_cast<int64_t>(JobEvents::kMaxEvents) + 5; ++i)
    events.Add(now, "e", "", i, 0, "");
  ASSERT_EQ(events.events().size(), JobEvents::kMaxEvents);
  EXPECT_EQ(events.events().front().step(), 5);
  EXPECT_EQ(events.events().back().step(),
            static_cast<int64_t>(JobEvents::kMaxEvents) + 4);
}

TEST(CoordinatorJobEventsTest, StatusAndStateHoldEveryEventInOrder) {
  JobEvents events;
  events.Add(absl::UnixEpoch(), "joined", "w0", 0, 0, "");
  events.Add(absl::UnixEpoch(), "left", "w0", 2, 0, "");
  v1::StatusResponse status;
  events.FillStatus(status);
  ASSERT_EQ(status.events_size(), 2);
  EXPECT_EQ(status.events(1).kind(), "left");

  v1::CoordinatorState state;
  events.SaveTo(state);
  JobEvents loaded;
  loaded.Add(absl::UnixEpoch(), "replaced", "", 0, 0, "");
  loaded.LoadFrom(state);
  ASSERT_EQ(loaded.events().size(), 2u);
  EXPECT_EQ(loaded.events()[0].kind(), "joined");
  EXPECT_EQ(loaded.events()[1].step(), 2);
}

}  // namespace
}  // namespace ferry

// Membership on its own: ids, generations, ring order, heartbeats and
// eviction by a FakeClock, departed byte counts, save and load.
#include "common/clock.h"
#include "coordinator/membership.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

v1::RegisterRequest Host(const std::string& name) {
  v1::RegisterRequest r;
  r.set_hostname(name);
  r.set_peer_address(name + ":1");
  return r;
}

TEST(CoordinatorMembershipTest, AddNamesMembersInJoinOrderAndBumpsGeneration) {
  FakeClock clock;
  Membership m;
  EXPECT_EQ(m.generation(), 1);
  EXPECT_EQ(m.Add(Host("a"), clock.Now()).id, "w0");
  EXPECT_EQ(m.Add(Host("b"), clock.Now()).id, "w1");
  EXPECT_EQ(m.generation(), 3);
  EXPECT_EQ(m.size(), 2);
  EXPECT_EQ(m.workers_seen(), 2);
  ASSERT_TRUE(m.Remove("w0"));
  EXPECT_EQ(m.generation(), 4);
  EXPECT_FALSE(m.Remove("w0"));
  EXPECT_EQ(m.generation(), 4);
  EXPECT_EQ(m.Add(Host("c"), clock.Now()).id, "w2");  // ids are not reused
  EXPECT_EQ(m.workers_seen(), 3);
  EXPECT_EQ(m.NextGeneration(), 6);
}

TEST(CoordinatorMembershipTest, RankedIsJoinOrderNotIdOrder) {
  FakeClock clock;
  Membership m;
  for (int i = 0; i < 12; ++i) m.Add(Host(std::to_string(i)), clock.Now());
  const auto ranked = m.Ranked();  // "w10" < "w2" as strings
  ASSERT_EQ(ranked.size(), 12u);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(ranked[i]->join_seq, i);
}

TEST(CoordinatorMembershipTest, HeartbeatsKeepMembersOffTheExpiredList) {
  FakeClock clock;
  Membership m;
  m.Add(Host("a"), clock.Now());
  m.Add(Host("b"), clock.Now());
  clock.Advance(absl::Seconds(3));
  ASSERT_TRUE(m.Heartbeat("w1", clock.Now()).ok());
  EXPECT_TRUE(m.Expired(clock.Now(), absl::Seconds(3)).empty());  // not more
  clock.Advance(absl::Seconds(2));
  EXPECT_EQ(m.Expired(clock.Now(), absl::Seconds(3)),
            std::vector<std::string>{"w0"});
  EXPECT_EQ(m.Heartbeat("w9", clock.Now()).code(), absl::StatusCode::kNotFound);
}

TEST(CoordinatorMembershipTest, DepartedMembersKeepTheirByteCounts) {
  FakeClock clock;
  Membership m;
  Membership::Member& a = m.Add(Host("a"), clock.Now());
  (*a.bytes.mutable_sent())["ps"] = 10;
  (*a.peer_bytes.mutable_sent())["w1"] = 4;
  ASSERT_TRUE(m.Remove("w0"));
  EXPECT_EQ(m.Find("w0"), nullptr);
  EXPECT_EQ(m.departed_bytes().at("w0").sent().at("ps"), 10);
  EXPECT_EQ(m.departed_peer_bytes().at("w0").sent().at("w1"), 4);
}

TEST(CoordinatorMembershipTest, SaveAndLoadKeepMembersAndGiveThemATimeout) {
  FakeClock clock;
  Membership m;
  m.Add(Host("a"), clock.Now()).tasks_done = 7;
  m.Add(Host("b"), clock.Now()).leases.emplace_back();
  m.Remove("w0");
  v1::CoordinatorState state;
  m.SaveTo(state);
  clock.Advance(absl::Hours(1));
  Membership loaded;
  loaded.LoadFrom(state, clock.Now());
  EXPECT_EQ(loaded.generation(), m.generation());
  EXPECT_EQ(loaded.workers_seen(), 2);
  ASSERT_NE(loaded.Find("w1"), nullptr);
  EXPECT_TRUE(loaded.Find("w1")->leases.empty());
  EXPECT_EQ(loaded.Find("w1")->info.hostname(), "b");
  EXPECT_TRUE(loaded.Expired(clock.Now(), absl::Seconds(1)).empty());
  EXPECT_EQ(loaded.departed_bytes().count("w0"), 1u);
  EXPECT_EQ(loaded.Add(Host("c"), clock.Now()).id, "w2");
}

}  // namespace
}  // namespace ferry

// RingWeightsSource against real RingPeer servers on loopback: the weights
// of a ring member that holds them all, and a ring pipeline's model put
// together from members that each hold some stages current, all of one
// step count.
#include "coordinator/ring_weights_source.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ring/ring_peer_service.h"
#include "tests/testing/wait_until.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;

struct Members {
  std::vector<std::unique_ptr<RingPeerServer>> servers;
  std::vector<std::string> Addresses() const {
    std::vector<std::string> out;
    for (const auto& s : servers) {
      out.push_back(absl::StrCat("127.0.0.1:", s->port));
    }
    return out;
  }
};

Members Start(int n) {
  Members members;
  for (int i = 0; i < n; ++i) {
    auto server = StartRingPeerServer("127.0.0.1:0");
    EXPECT_TRUE(server.ok()) << server.status();
    (*server)->service->set_job_id("job");
    members.servers.push_back(*std::move(server));
  }
  return members;
}

// Element i of the state after `steps` steps.
std::vector<float> State(int64_t steps, int n = 10) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>(steps * 100 + i);
  return v;
}

// Publishes the range [begin, end) of the state after `steps` steps (of 10
// elements) on `server`.
void PublishPart(RingPeerServer& server, int64_t steps, int64_t begin,
                 int64_t end) {
  const std::vector<FlatRange> ranges = {{begin, end}};
  server.publisher->Publish(steps, PackRanges(State(steps).data(), ranges), {},
                            ranges, 10);
}

TEST(RingWeightsSourceTest, PutsAPipelinesModelTogetherFromItsStages) {
  Members members = Start(3);
  RingWeightsSource source("job", absl::Seconds(10));
  source.set_member_source([&] { return members.Addresses(); });
  // Stage 0 is [0, 4), stage 1 [4, 10); member 2 holds nothing current
  // yet (nothing published).
  PublishPart(*members.servers[0], 5, 0, 4);
  PublishPart(*members.servers[1], 5, 4, 10);
  std::vector<float> params(10, -1.0f);
  ASSERT_TRUE(source.Fetch(5, params).ok());
  EXPECT_EQ(params, State(5));

  // Parts of different steps are not mixed: the older member is asked for
  // the newer state, which it publishes between two of its steps.
  PublishPart(*members.servers[1], 6, 4, 10);
  std::thread republish([&] {
    const absl::Status wanted = testutil::WaitUntil(
        "member 0's publisher to be asked for a refresh",
        [&] { return members.servers[0]->publisher->wanted(); });
    EXPECT_TRUE(wanted.ok()) << wanted;
    PublishPart(*members.servers[0], 6, 0, 4);
  });
  ASSERT_TRUE(source.Fetch(5, params).ok());
  republish.join();
  EXPECT_EQ(params, State(6));
}

// A member that lends its params (no copy): they are streamed from its
// buffer.
TEST(RingWeightsSourceTest, ALentSnapshotIsStreamedFromTheMembersBuffer) {
  Members members = Start(1);
  RingWeightsSource source("job", absl::Seconds(10));
  source.set_member_source([&] { return members.Addresses(); });
  const std::vector<float> live = State(7);
  members.servers[0]->publisher->Lend(7, live.data(), 10);
  std::vector<float> params(10, -1.0f);
  ASSERT_TRUE(source.Fetch(7, params).ok());
  EXPECT_EQ(params, live);
  // Taken back (the member's next step): copied or, read already, dropped.
  members.servers[0]->publisher->TakeBack();
  EXPECT_FALSE(members.servers[0]->publisher->lent());
}

TEST(RingWeightsSourceTest, WholeModelFromTheFirstMemberAndPartsThatNeverMeet) {
  Members members = Start(2);
  RingWeightsSource source("job", absl::Milliseconds(500));
  source.set_member_source([&] { return members.Addresses(); });
  members.servers[0]->publisher->Publish(3, State(3));
  std::vector<float> params(10, -1.0f);
  ASSERT_TRUE(source.Fetch(2, params).ok());
  EXPECT_EQ(params, State(3));

  // Only stage 0 is held anywhere: no model, DEADLINE_EXCEEDED that says
  // why.
  PublishPart(*members.servers[0], 4, 0, 4);
  PublishPart(*members.servers[1], 4, 0, 4);
  const absl::Status partial = source.Fetch(4, params);
  EXPECT_EQ(partial.code(), absl::StatusCode::kDeadlineExceeded) << partial;
  EXPECT_THAT(std::string(partial.message()),
              ::testing::HasSubstr("only parts of the weights"));
}

// Every member asked copies the model into a snapshot: the reader waits for
// the first one that said it will publish, and asks no other.
TEST(RingWeightsSourceTest, OnlyTheFirstMemberAskedIsMadeToPublish) {
  Members members = Start(3);
  RingWeightsSource source("job", absl::Seconds(30));
  source.set_member_source([&] { return members.Addresses(); });
  std::thread member0([&] {
    const absl::Status wanted = testutil::WaitUntil(
        "member 0's publisher to be asked for the weights",
        [&] { return members.servers[0]->publisher->wanted(); });
    EXPECT_TRUE(wanted.ok()) << wanted;
    members.servers[0]->publisher->Publish(7, State(7));
  });
  std::vector<float> params(10, -1.0f);
  ASSERT_TRUE(source.Fetch(7, params).ok());
  member0.join();
  EXPECT_EQ(params, State(7));
  EXPECT_FALSE(members.servers[1]->publisher->wanted());
  EXPECT_FALSE(members.servers[2]->publisher->wanted());
}

// A member that does not publish within the wait (stuck in a collective,
// gone) does not hold the evaluation up: the others are asked then.
TEST(RingWeightsSourceTest, TheOthersAreAskedWhenTheFirstDoesNotPublish) {
  Members members = Start(2);
  RingWeightsSource source("job", absl::Seconds(30),
                           /*prefer_wait=*/absl::Milliseconds(200));
  source.set_member_source([&] { return members.Addresses(); });
  std::thread member1([&] {
    const absl::Status wanted = testutil::WaitUntil(
        "member 1's publisher to be asked for the weights",
        [&] { return members.servers[1]->publisher->wanted(); });
    EXPECT_TRUE(wanted.ok()) << wanted;
    members.servers[1]->publisher->Publish(3, State(3));
  });
  std::vector<float> params(10, -1.0f);
  ASSERT_TRUE(source.Fetch(3, params).ok());
  member1.join();
  EXPECT_EQ(params, State(3));
  EXPECT_TRUE(members.servers[0]->publisher->wanted());  // asked, silent
}

}  // namespace
}  // namespace ferry

#include "ps/shard_counters.h"

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

TEST(PushCountersTest, CountsAndStaleness) {
  PushCounters counters;
  counters.CountAccepted();
  counters.CountAccepted();
  counters.CountRejected();
  counters.CountFinalizedOnPush();
  counters.RecordStaleness(3);
  counters.RecordStaleness(1);
  const PushCounts& c = counters.counts();
  EXPECT_EQ(c.accepted, 2);
  EXPECT_EQ(c.rejected, 1);
  EXPECT_EQ(c.finalized_on_push, 1);
  EXPECT_EQ(c.max_staleness, 3);
  EXPECT_EQ(c.sum_staleness, 4);
}

TEST(PeerBytesTest, AddsByRoleAndLeavesOutZeroDirections) {
  PeerBytes bytes;
  bytes.Add("worker", 10, 0);
  bytes.Add("worker", 5, 7);
  bytes.Add("coordinator", 0, 3);
  std::map<std::string, int64_t> sent, received;
  bytes.CopyTo(sent, received);
  EXPECT_EQ(sent, (std::map<std::string, int64_t>{{"worker", 15}}));
  EXPECT_EQ(received, (std::map<std::string, int64_t>{{"coordinator", 3},
                                                      {"worker", 7}}));
}

TEST(PeerBytesTest, ConcurrentAddsAllCount) {
  PeerBytes bytes;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&bytes] {
      for (int i = 0; i < 1000; ++i) bytes.Add("worker", 1, 2);
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::map<std::string, int64_t> sent, received;
  bytes.CopyTo(sent, received);
  EXPECT_EQ(sent["worker"], 4000);
  EXPECT_EQ(received["worker"], 8000);
}

}  // namespace
}  // namespace ferry

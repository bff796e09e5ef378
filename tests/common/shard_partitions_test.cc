#include "common/shard_partitions.h"

#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ShardPartitionsTest, ProcessesServeInterleavedShardsCoveringEachOnce) {
  EXPECT_THAT(ShardsOfProcess(0, 2, 3), ElementsAre(0, 2, 4));
  EXPECT_THAT(ShardsOfProcess(1, 2, 3), ElementsAre(1, 3, 5));
  EXPECT_THAT(ShardsOfProcess(1, 3, 1), ElementsAre(1));
  for (int processes = 1; processes <= 5; ++processes) {
    for (int partitions = 1; partitions <= 4; ++partitions) {
      std::multiset<int> seen;
      for (int p = 0; p < processes; ++p) {
        for (int shard : ShardsOfProcess(p, processes, partitions)) {
          EXPECT_EQ(shard % processes, p);  // neighbours on other processes
          seen.insert(shard);
        }
      }
      ASSERT_EQ(seen.size(), static_cast<size_t>(processes * partitions));
      for (int s = 0; s < processes * partitions; ++s)
        EXPECT_EQ(seen.count(s), 1u);
    }
  }
}

TEST(ShardPartitionsTest, LogicalAddressesFollowTheLayout) {
  const std::vector<std::vector<std::string>> per_process = {
      {"a:1", "a:2", "a:3"}, {"b:1", "b:2", "b:3"}};
  const std::vector<std::string> logical = LogicalShardAddresses(per_process);
  EXPECT_THAT(logical, ElementsAre("a:1", "b:1", "a:2", "b:2", "a:3", "b:3"));
  for (int p = 0; p < 2; ++p) {
    const std::vector<int> shards = ShardsOfProcess(p, 2, 3);
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(logical[shards[i]], per_process[p][i]);
  }
  EXPECT_TRUE(LogicalShardAddresses({}).empty());
}

TEST(ShardPartitionsTest, CheckPartitionsNamesBothNumbers) {
  EXPECT_TRUE(CheckPartitions(4, 2).ok());
  EXPECT_TRUE(CheckPartitions(3, 1).ok());
  EXPECT_THAT(
      std::string(CheckPartitions(3, 2).message()),
      HasSubstr("3 shard addresses are not a multiple of --partitions 2"));
  EXPECT_FALSE(CheckPartitions(1, 2).ok());
  EXPECT_THAT(std::string(CheckPartitions(4, 0).message()),
              HasSubstr("--partitions must be >= 1, got 0"));
}

TEST(ShardPartitionsTest, ListenAddressesFromOnePortOrAList) {
  EXPECT_THAT(*PartitionListenAddresses("0.0.0.0:7071", 3),
              ElementsAre("0.0.0.0:7071", "0.0.0.0:7072", "0.0.0.0:7073"));
  EXPECT_THAT(*PartitionListenAddresses("127.0.0.1:0", 2),
              ElementsAre("127.0.0.1:0", "127.0.0.1:0"));
  EXPECT_THAT(*PartitionListenAddresses("h:5,h:9", 2),
              ElementsAre("h:5", "h:9"));
  EXPECT_THAT(*PartitionListenAddresses("[::1]:7071", 1),
              ElementsAre("[::1]:7071"));
  EXPECT_THAT(
      std::string(PartitionListenAddresses("h:5,h:9", 3).status().message()),
      HasSubstr("lists 2 addresses for 3 partitions"));
  EXPECT_THAT(std::string(PartitionListenAddresses("h", 1).status().message()),
              HasSubstr("'h' is not HOST:PORT"));
  EXPECT_THAT(
      std::string(PartitionListenAddresses("h:x", 1).status().message()),
      HasSubstr("is not HOST:PORT"));
  EXPECT_THAT(
      std::string(PartitionListenAddresses("h:65535", 2).status().message()),
      HasSubstr("go beyond 65535"));
}

}  // namespace
}  // namespace ferry

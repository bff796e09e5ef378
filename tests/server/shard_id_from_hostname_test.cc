#include "gtest/gtest.h"
#include "server/server_main.h"

namespace ferry {
namespace {

TEST(ShardIdFromHostname, TakesTheStatefulSetOrdinal) {
  EXPECT_EQ(*ShardIdFromHostname("ferry-ps-0"), 0);
  EXPECT_EQ(*ShardIdFromHostname("ferry-ps-2"), 2);
  EXPECT_EQ(*ShardIdFromHostname("ps-17"), 17);
  EXPECT_EQ(*ShardIdFromHostname("a-007"), 7);
}

TEST(ShardIdFromHostname, RejectsNamesWithoutATrailingOrdinal) {
  for (const char* name : {"", "ferry-ps", "ferry-ps-", "ferry-ps2", "7", "-3",
                           "ferry-ps-x1", "ferry-ps-12345678"}) {
    auto id = ShardIdFromHostname(name);
    EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument) << name;
  }
}

}  // namespace
}  // namespace ferry

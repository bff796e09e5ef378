// ShardIdFromHostname (server/server_main.h): the StatefulSet ordinal, its
// errors naming ferry-server's flag.
#include "gtest/gtest.h"
#include "server/server_main.h"

namespace ferry {
namespace {

TEST(ShardIdFromHostname, TakesTheStatefulSetOrdinal) {
  EXPECT_EQ(*ShardIdFromHostname("ferry-ps-2"), 2);
}

TEST(ShardIdFromHostname, ErrorsNameTheFlag) {
  auto id = ShardIdFromHostname("ferry-ps");
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(id.status().message().find("--shard-id-from-hostname"),
            std::string::npos)
      << id.status();
}

}  // namespace
}  // namespace ferry

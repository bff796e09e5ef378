// --host-shard-from-hostname (worker/hosted_shard.h): the shard process a
// StatefulSet pod hosts, from its name.
#include "CLI/CLI.hpp"
#include "gtest/gtest.h"
#include "worker/hosted_shard.h"

namespace ferry {
namespace {

HostedShardFlags Parse(std::vector<std::string> args) {
  HostedShardFlags flags;
  CLI::App app;
  AddHostedShardFlags(app, flags);
  args.insert(args.begin(), "ferry-worker");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return flags;
}

TEST(HostedShardFlags, TheOrdinalOfThePodNameIsTheShardProcess) {
  HostedShardFlags flags = Parse({"--host-shard-from-hostname"});
  EXPECT_FALSE(flags.enabled());  // until resolved
  ASSERT_TRUE(ResolveHostedShardFlags(flags, "ferry-ps-1").ok());
  EXPECT_TRUE(flags.enabled());
  EXPECT_EQ(flags.process_id, 1);
}

TEST(HostedShardFlags, WithoutTheFlagThePodNameChangesNothing) {
  HostedShardFlags none = Parse({});
  ASSERT_TRUE(ResolveHostedShardFlags(none, "ferry-ps-1").ok());
  EXPECT_FALSE(none.enabled());
  HostedShardFlags given = Parse({"--host-shard", "0"});
  ASSERT_TRUE(ResolveHostedShardFlags(given, "ferry-ps-1").ok());
  EXPECT_EQ(given.process_id, 0);
}

TEST(HostedShardFlags, BadNamesAndBothFlagsAreRefusedNamingTheFlag) {
  HostedShardFlags flags = Parse({"--host-shard-from-hostname"});
  absl::Status status = ResolveHostedShardFlags(flags, "worker");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--host-shard-from-hostname"),
            std::string::npos)
      << status;
  EXPECT_FALSE(flags.enabled());
  HostedShardFlags both =
      Parse({"--host-shard", "0", "--host-shard-from-hostname"});
  status = ResolveHostedShardFlags(both, "ferry-ps-1");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(both.process_id, 0);
}

}  // namespace
}  // namespace ferry

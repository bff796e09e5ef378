// ferry-server's command line: the role as a subcommand (older --role and
// FERRY_ROLE spellings mapped onto it), each role accepting only its flags.
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/cli_main.h"
#include "gtest/gtest.h"
#include "server/coordinator_command.h"
#include "server/ps_command.h"
#include "server/role_args.h"

namespace ferry {
namespace {

using Args = std::vector<std::string>;

TEST(RoleAsSubcommandTest, KeepsASubcommandAndMapsTheOlderSpellings) {
  EXPECT_EQ(*RoleAsSubcommand({"s", "ps", "--shard-id", "1"}, ""),
            (Args{"s", "ps", "--shard-id", "1"}));
  EXPECT_EQ(*RoleAsSubcommand({"s", "--role", "ps", "--shard-id", "1"}, ""),
            (Args{"s", "ps", "--shard-id", "1"}));
  EXPECT_EQ(
      *RoleAsSubcommand({"s", "--shard-id-from-hostname", "--role=ps"}, ""),
      (Args{"s", "ps", "--shard-id-from-hostname"}));
  EXPECT_EQ(*RoleAsSubcommand({"s", "--listen", "x:1"}, "coordinator"),
            (Args{"s", "coordinator", "--listen", "x:1"}));
  // A flag beats the environment; the same role twice is one role.
  EXPECT_EQ(*RoleAsSubcommand({"s", "--role", "ps"}, "coordinator"),
            (Args{"s", "ps"}));
  EXPECT_EQ(*RoleAsSubcommand({"s", "ps", "--role=ps"}, ""), (Args{"s", "ps"}));
  // No role anywhere: unchanged, the parser asks for one.
  EXPECT_EQ(*RoleAsSubcommand({"s", "--help"}, ""), (Args{"s", "--help"}));
}

TEST(RoleAsSubcommandTest, RefusesUnknownMissingAndConflictingRoles) {
  for (const Args& args : {Args{"s", "--role", "worker"}, Args{"s", "--role"},
                           Args{"s", "--role=ps", "--role=coordinator"},
                           Args{"s", "coordinator", "--role", "ps"}}) {
    auto mapped = RoleAsSubcommand(args, "");
    EXPECT_EQ(mapped.status().code(), absl::StatusCode::kInvalidArgument)
        << args.back();
  }
  auto bad_env = RoleAsSubcommand({"s"}, "shard");
  ASSERT_FALSE(bad_env.ok());
  EXPECT_NE(bad_env.status().message().find("FERRY_ROLE"), std::string::npos);
}

// The two subcommands as ferry-server builds them.
struct ServerCommandLine {
  CLI::App app{"test"};
  CoordinatorCommandLine coordinator;
  PsCommandLine ps;
  CLI::App* coordinator_command = nullptr;
  CLI::App* ps_command = nullptr;

  ServerCommandLine() {
    app.require_subcommand(1, 1);
    coordinator_command = app.add_subcommand("coordinator");
    ps_command = app.add_subcommand("ps");
    AddCoordinatorFlags(*coordinator_command, coordinator);
    AddPsFlags(*ps_command, ps);
  }
};

TEST(ServerCommandsTest, EachRoleTakesOnlyItsFlags) {
  ServerCommandLine ok;
  ASSERT_EQ(
      std::nullopt,
      ParseCommandLine(ok.app, {"s", "ps", "--shard-id", "3", "--listen", "h:0",
                                "--port-file", "f", "--health-port", "9"}));
  EXPECT_TRUE(ok.ps_command->parsed());
  EXPECT_EQ(ok.ps.flags.shard_id, 3);
  EXPECT_EQ(ok.ps.flags.listen, "h:0");
  EXPECT_EQ(ok.ps.flags.port_file, "f");
  EXPECT_EQ(ok.ps.ops.health_port, 9);
  EXPECT_EQ(ok.ps.ops.log_level, "info");  // defaults kept

  ServerCommandLine job_flag_on_a_shard;
  EXPECT_EQ(
      ParseCommandLine(job_flag_on_a_shard.app, {"s", "ps", "--model", "mlp"}),
      2);
  ServerCommandLine shard_flag_on_the_coordinator;
  EXPECT_EQ(ParseCommandLine(shard_flag_on_the_coordinator.app,
                             {"s", "coordinator", "--shard-id", "1"}),
            2);
  ServerCommandLine no_role;
  EXPECT_EQ(ParseCommandLine(no_role.app, {"s", "--listen", "h:1"}), 2);
}

TEST(ServerCommandsTest, TheCoordinatorsFlagsResolveIntoItsJob) {
  ServerCommandLine line;
  ASSERT_EQ(std::nullopt,
            ParseCommandLine(
                line.app, {"s", "coordinator", "--model", "mlp", "--optimizer",
                           "adam", "--lr", "0.01", "--shards", "a:1,b:2"}));
  auto flags = ResolveCoordinatorFlags(line.coordinator);
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->model, "mlp");
  EXPECT_EQ(flags->shards, (Args{"a:1", "b:2"}));
  EXPECT_DOUBLE_EQ(flags->optimizer.lr, 0.01);
  EXPECT_FALSE(flags->embedding_given);

  ServerCommandLine bad;
  ASSERT_EQ(std::nullopt,
            ParseCommandLine(bad.app,
                             {"s", "coordinator", "--optimizer", "rmsprop"}));
  EXPECT_EQ(ResolveCoordinatorFlags(bad.coordinator).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ServerCommandsTest, AShardTakesItsIdFromThePodName) {
  ServerCommandLine line;
  ASSERT_EQ(
      std::nullopt,
      ParseCommandLine(line.app, {"s", "ps", "--shard-id-from-hostname"}));
  auto flags = ResolvePsFlags(line.ps, "ferry-ps-2");
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->shard_id, 2);
  EXPECT_EQ(ResolvePsFlags(line.ps, "laptop").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ferry

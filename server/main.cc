// ferry-server: runs a job's coordinator or one of its PS shards.
//   ferry-server coordinator --listen 0.0.0.0:7070 --shards ps0:7071,ps1:7071
//       [job flags]
//   ferry-server ps --listen 0.0.0.0:7071 --coordinator coord:7070
//       --shard-id 0
// `--role coordinator|ps` and FERRY_ROLE still name the role
// (server/role_args.h).
#include <cstdlib>
#include <string>

#include "CLI/CLI.hpp"
#include "common/allocator_tuning.h"
#include "common/cli_flags.h"
#include "common/cli_main.h"
#include "common/mutex_checks.h"
#include "common/pod_name.h"
#include "common/shutdown_signal.h"
#include "proto/process_ops.h"
#include "server/coordinator_command.h"
#include "server/ps_command.h"
#include "server/role_args.h"

namespace {

constexpr char kProgram[] = "ferry-server";
constexpr char kExitFooter[] =
    "Exit status: 0 done, 1 runtime error (supervisors restart it), 2 invalid "
    "configuration (bad usage, a model the dataset does not fit; never "
    "restarted).";

int RunCoordinatorCommand(const ferry::CoordinatorCommandLine& line) {
  auto flags = ferry::ResolveCoordinatorFlags(line);
  if (!flags.ok()) return ferry::ExitWithError(kProgram, flags.status());
  auto ops = ferry::ProcessOps::Start(line.ops, "coordinator",
                                      ferry::MetricRole::kCoordinator);
  if (!ops.ok()) return ferry::ExitWithError(kProgram, ops.status());
  return ferry::RunCoordinator(*flags, **ops);
}

int RunPsCommand(const ferry::PsCommandLine& line) {
  auto flags = ferry::ResolvePsFlags(line, ferry::PodName());
  if (!flags.ok()) return ferry::ExitWithError(kProgram, flags.status());
  auto ops = ferry::ProcessOps::Start(line.ops,
                                      "ps-" + std::to_string(flags->shard_id),
                                      ferry::MetricRole::kPs);
  if (!ops.ok()) return ferry::ExitWithError(kProgram, ops.status());
  return ferry::RunPsShard(*flags, **ops);
}

}  // namespace

int main(int argc, char** argv) {
  ferry::TuneAllocatorForLargeMessages(argv);
  ferry::ConfigureMutexDeadlockChecks();
  ferry::BlockShutdownSignals();
  const char* env_role = std::getenv("FERRY_ROLE");
  auto args = ferry::RoleAsSubcommand(ferry::ArgsOf(argc, argv),
                                      env_role != nullptr ? env_role : "");
  if (!args.ok()) return ferry::ExitWithError(kProgram, args.status());

  CLI::App app{
      "ferry-server: coordinator or parameter-server shard of a ferry job"};
  app.footer(kExitFooter);
  app.require_subcommand(1, 1);
  CLI::App* coordinator = app.add_subcommand(
      "coordinator", "the job's coordinator: membership, steps, recovery");
  coordinator->footer(kExitFooter);
  CLI::App* ps = app.add_subcommand(
      "ps", "one parameter-server shard process (--partitions: several)");
  ps->footer(kExitFooter);
  ferry::CoordinatorCommandLine coordinator_line;
  ferry::AddCoordinatorFlags(*coordinator, coordinator_line);
  ferry::PsCommandLine ps_line;
  ferry::AddPsFlags(*ps, ps_line);
  ferry::BindEnvironment(app);
  if (auto exit = ferry::ParseCommandLine(app, *args)) return *exit;
  return coordinator->parsed() ? RunCoordinatorCommand(coordinator_line)
                               : RunPsCommand(ps_line);
}

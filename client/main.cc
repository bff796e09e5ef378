// ferry: run a local cluster, inspect a running job.
//   ferry local --mode ps --workers 2 --shards 2 --epochs 12
//   ferry status --coordinator HOST:PORT
//   ferry health --address HOST:PORT [--service liveness]
//   ferry bench compare --quick --out out/compare
//   ferry cost --model resnet50 --workers 8 --shards 4 --bandwidth 10Gbit
#include "CLI/CLI.hpp"
#include "client/bench_compare.h"
#include "client/cost_command.h"
#include "client/data_command.h"
#include "client/health_command.h"
#include "client/local_command.h"
#include "client/status_view.h"
#include "common/cli_flags.h"
#include "common/cli_main.h"
#include "common/mutex_checks.h"
#include "common/ops_flags.h"
#include "common/shutdown_signal.h"
#include "proto/rpc_security.h"

int main(int argc, char** argv) {
  ferry::ConfigureMutexDeadlockChecks();
  ferry::BlockShutdownSignals();
  CLI::App app{
      "ferry: distributed training with parameter servers or ring all-reduce"};
  app.require_subcommand(1);

  CLI::App* local =
      app.add_subcommand("local", "run a whole job on this machine (loopback)");
  ferry::LocalCommandLine local_line;
  ferry::AddLocalFlags(*local, local_line);

  CLI::App* cost = app.add_subcommand(
      "cost",
      "predict bytes and step time of PS vs ring all-reduce (cost model)");
  ferry::CostFlags cost_flags;
  ferry::AddCostFlags(*cost, cost_flags);

  CLI::App* bench = app.add_subcommand("bench", "benchmarks on local clusters");
  bench->require_subcommand(1);
  CLI::App* compare =
      bench->add_subcommand("compare",
                            "sweep PS vs ring jobs, measure bytes and step "
                            "times against the cost model");
  ferry::BenchCompareFlags compare_flags;
  ferry::AddBenchCompareFlags(*compare, compare_flags);

  CLI::App* data = app.add_subcommand("data", "generate data sets");
  data->require_subcommand(1);
  ferry::DataCtrFlags ctr_flags;
  CLI::App* ctr = ferry::AddDataCtrCommand(*data, ctr_flags);

  CLI::App* status = app.add_subcommand("status", "show a running job");
  std::string coordinator;
  bool json = false;
  status->add_option("--coordinator", coordinator, "coordinator HOST:PORT")
      ->required();
  status->add_flag("--json", json, "print the raw status as JSON");
  ferry::OpsFlags client_security;
  ferry::AddClientSecurityFlags(*status, client_security);

  CLI::App* health =
      app.add_subcommand("health",
                         "check a process's grpc.health.v1 status (exit 0 "
                         "SERVING, 1 not, 2 no answer)");
  ferry::HealthFlags health_flags;
  ferry::AddHealthFlags(*health, health_flags);
  ferry::AddClientSecurityFlags(*health, client_security);
  ferry::BindEnvironment(app);
  if (auto exit = ferry::ParseCommandLine(app, ferry::ArgsOf(argc, argv))) {
    return *exit;
  }

  if (*status || *health) {
    if (absl::Status s = ferry::InstallRpcSecurity(client_security); !s.ok()) {
      return ferry::ExitWithConfigError("ferry", s.message());
    }
  }
  if (*status) return ferry::ShowStatus(coordinator, json);
  if (*health) return ferry::RunHealth(health_flags);
  if (*cost) return ferry::RunCost(cost_flags);
  if (*ctr) return ferry::RunDataCtr(ctr_flags);
  if (*compare) return ferry::RunBenchCompare(compare_flags);
  return ferry::RunLocalCommand(local_line);
}

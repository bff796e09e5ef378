#include "tests/integration/cluster_fixture.h"

#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "common/shard_partitions.h"
#include "gtest/gtest.h"
#include "model/model_spec.h"
#include "proto/rpc_util.h"
#include "tests/testing/wait_until.h"

namespace ferry::testing {

std::string ClusterLogDir(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/ferry-", name, "-", getpid());
}

TrainOptions EquivalenceReference(int steps, const std::string& model) {
  TrainOptions single;
  single.model = model;
  single.dataset = "synthetic:600";
  single.batch = 40;
  single.epochs = 1;
  single.max_steps = steps;
  single.device = DeviceChoice::kCpu;
  const bool mlp = ParseMlpSpec(model).ok();
  single.optimizer.kind = mlp ? OptimizerKind::kAdam : OptimizerKind::kMomentum;
  single.optimizer.lr = mlp ? 0.01 : 0.05;
  single.optimizer.weight_decay = 0;
  single.optimizer.schedule.kind = ScheduleKind::kCosine;
  single.optimizer.schedule.warmup_steps = 2;
  return single;
}

std::vector<std::string> EquivalenceJobArgs(int steps,
                                            const std::string& model) {
  return {"--model",        model,
          "--dataset",      "synthetic:600",
          "--batch",        "40",
          "--epochs",       "1",
          "--max-steps",    std::to_string(steps),
          "--optimizer",    ParseMlpSpec(model).ok() ? "adam" : "momentum",
          "--lr",           ParseMlpSpec(model).ok() ? "0.01" : "0.05",
          "--nesterov",     "false",
          "--lr-schedule",  "cosine",
          "--warmup-steps", "2",
          "--weight-decay", "0"};
}

TestCluster::~TestCluster() {
  for (ChildProcess& w : workers_) w.Stop(absl::Seconds(5));
  for (auto it = servers_.rbegin(); it != servers_.rend(); ++it)
    it->Stop(absl::Seconds(5));
}

absl::StatusOr<std::unique_ptr<TestCluster>> TestCluster::Start(
    const ClusterSpec& spec, const std::string& log_dir) {
  std::filesystem::create_directories(log_dir);
  auto cluster = std::make_unique<TestCluster>();
  const std::string bin = FERRY_BIN_DIR;
  const int shards = spec.mode == "ring" ? 0 : spec.shards;
  // Each shard process's partition addresses; the job lists them in
  // logical order (common/shard_partitions.h). Picked in advance: the
  // coordinator's --shards names them before any shard runs.
  auto process_addresses = PickPartitionAddresses(shards, spec.partitions);
  if (!process_addresses.ok()) return process_addresses.status();
  cluster->shard_addresses_ = LogicalShardAddresses(*process_addresses);
  // The coordinator binds a free port and reports it.
  const std::string port_file = log_dir + "/coordinator.port";
  std::filesystem::remove(port_file);
  std::vector<std::string> argv = {bin + "/ferry-server",
                                   "--role",
                                   "coordinator",
                                   "--listen",
                                   "127.0.0.1:0",
                                   "--port-file",
                                   port_file,
                                   "--mode",
                                   spec.mode,
                                   "--min-workers",
                                   std::to_string(spec.workers)};
  if (shards > 0) {
    argv.insert(argv.end(),
                {"--shards", absl::StrJoin(cluster->shard_addresses_, ",")});
  }
  argv.insert(argv.end(), spec.job_args.begin(), spec.job_args.end());
  auto coord = ChildProcess::Spawn(argv, log_dir + "/coordinator.log");
  if (!coord.ok()) return coord.status();
  cluster->servers_.push_back(std::move(*coord));
  absl::StatusOr<std::string> text =
      AwaitFileOf(cluster->servers_.back(), port_file, absl::Seconds(60));
  if (!text.ok()) return text.status();
  absl::StatusOr<std::vector<int>> port = ParsePortFile(*text);
  if (!port.ok()) return port.status();
  cluster->coordinator_ = absl::StrCat("127.0.0.1:", port->front());
  for (int i = 0; i < shards; ++i) {
    auto shard = ChildProcess::Spawn(
        {bin + "/ferry-server", "--role", "ps", "--listen",
         absl::StrJoin((*process_addresses)[i], ","), "--partitions",
         std::to_string(spec.partitions), "--coordinator",
         cluster->coordinator_, "--shard-id", std::to_string(i)},
        absl::StrCat(log_dir, "/ps", i, ".log"));
    if (!shard.ok()) return shard.status();
    cluster->servers_.push_back(std::move(*shard));
  }
  for (int i = 0; i < spec.workers; ++i) {
    std::vector<std::string> worker_argv = {bin + "/ferry-worker",
                                            "--coordinator",
                                            cluster->coordinator_,
                                            "--device",
                                            "cpu",
                                            "--peer-listen",
                                            "127.0.0.1:0"};
    for (const std::string& arg : spec.worker_args) {
      worker_argv.push_back(
          absl::StrReplaceAll(arg, {{"{i}", std::to_string(i)}}));
    }
    auto worker = ChildProcess::Spawn(
        worker_argv, absl::StrCat(log_dir, "/worker", i, ".log"));
    if (!worker.ok()) return worker.status();
    cluster->workers_.push_back(std::move(*worker));
  }
  return cluster;
}

absl::StatusOr<v1::StatusResponse> TestCluster::WaitFinished(
    absl::Duration timeout) {
  auto stub = v1::Coordinator::NewStub(MakeChannel(coordinator_));
  v1::StatusResponse status;
  absl::Status exited;
  const absl::Status waited = testutil::WaitUntil(
      "the job to finish",
      [&] {
        for (ChildProcess& s : servers_) {
          if (auto code = s.Poll()) {
            exited = absl::InternalError(absl::StrCat(
                "a server exited with code ", *code, "; see ", s.log_path()));
            return true;
          }
        }
        grpc::ClientContext context;
        SetDeadline(context, absl::Seconds(2));
        return stub->Status(&context, v1::StatusRequest(), &status).ok() &&
               status.finished();
      },
      timeout);
  if (!exited.ok()) return exited;
  if (!waited.ok()) return waited;
  return status;
}

std::vector<std::optional<int>> TestCluster::WorkerExitCodes() {
  std::vector<std::optional<int>> codes;
  for (ChildProcess& w : workers_) codes.push_back(w.Poll());
  return codes;
}

}  // namespace ferry::testing

#include "client/local_cluster.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/child_process.h"
#include "common/progress.h"
#include "common/shutdown_signal.h"
#include "ferry/v1/coordinator.grpc.pb.h"
#include "ferry/v1/ps.grpc.pb.h"
#include "google/protobuf/util/json_util.h"
#include "proto/rpc_util.h"

namespace ferry {
namespace {

struct Proc {
  std::string role;
  int index = 0;
  std::string address;
  ChildProcess child;
};

std::string ToJson(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out;
}

void WriteClusterFile(const std::string& path, const std::vector<Proc>& procs) {
  if (path.empty()) return;
  nlohmann::json list = nlohmann::json::array();
  for (const Proc& p : procs) {
    list.push_back({{"role", p.role}, {"index", p.index}, {"address", p.address},
                    {"pid", p.child.pid()}, {"log", p.child.log_path()}});
  }
  std::ofstream(path + ".tmp") << list.dump(2) << "\n";
  std::rename((path + ".tmp").c_str(), path.c_str());
}

absl::StatusOr<v1::StatusResponse> FetchStatus(v1::Coordinator::Stub& stub) {
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(2));
  v1::StatusResponse status;
  const grpc::Status rpc = stub.Status(&context, v1::StatusRequest(), &status);
  if (!rpc.ok()) return FromGrpcStatus(rpc);
  return status;
}

std::string ProgressText(const v1::StatusResponse& s) {
  std::string acc = s.evals_size() > 0
                        ? absl::StrFormat("%.4f", s.evals(s.evals_size() - 1).test_accuracy())
                        : "-";
  return absl::StrFormat("epoch %d/%d  step %d  %d workers  %.0f samples/s  loss %.4f  test acc %s",
                         s.epoch() + 1, s.job().epochs(), s.step(), s.members_size(),
                         s.samples_per_second(), s.train_loss(), acc);
}

}  // namespace

nlohmann::json BuildSummary(const LocalClusterOptions& options, const std::string& status_json,
                            const std::vector<std::string>& shard_info_json) {
  const nlohmann::json s = nlohmann::json::parse(status_json);
  auto num = [](const nlohmann::json& j, const char* key) -> double {
    if (!j.contains(key)) return 0.0;
    const auto& v = j.at(key);
    return v.is_string() ? std::stod(v.get<std::string>()) : v.get<double>();
  };
  nlohmann::json bytes = {{"worker", {{"sent", 0}, {"received", 0}}},
                          {"ps", {{"sent", 0}, {"received", 0}}},
                          {"coordinator", {{"sent", 0}, {"received", 0}}}};
  auto add_counts = [&](const char* role, const nlohmann::json& counts) {
    for (const char* dir : {"sent", "received"}) {
      if (!counts.contains(dir)) continue;
      for (const auto& [peer, n] : counts.at(dir).items()) {
        bytes[role][dir] = bytes[role][dir].get<int64_t>() +
                           (n.is_string() ? std::stoll(n.get<std::string>()) : n.get<int64_t>());
      }
    }
  };
  // Workers' bytes split by the peer role they went to or came from.
  nlohmann::json by_peer = nlohmann::json::object();
  if (s.contains("worker_bytes")) {
    for (const auto& [id, counts] : s.at("worker_bytes").items()) {
      add_counts("worker", counts);
      for (const char* dir : {"sent", "received"}) {
        if (!counts.contains(dir)) continue;
        for (const auto& [peer, n] : counts.at(dir).items()) {
          const int64_t v = n.is_string() ? std::stoll(n.get<std::string>()) : n.get<int64_t>();
          nlohmann::json& slot = by_peer[peer][dir];
          slot = (slot.is_null() ? int64_t{0} : slot.get<int64_t>()) + v;
        }
      }
    }
  }
  if (s.contains("coordinator_bytes")) add_counts("coordinator", s.at("coordinator_bytes"));
  for (const std::string& info : shard_info_json) {
    const nlohmann::json j = nlohmann::json::parse(info);
    if (j.contains("bytes")) add_counts("ps", j.at("bytes"));
  }
  // Worker traffic per individual shard ("ps0", ...), summed over workers.
  nlohmann::json by_shard = nlohmann::json::object();
  if (s.contains("worker_peer_bytes")) {
    for (const auto& [id, counts] : s.at("worker_peer_bytes").items()) {
      for (const char* dir : {"sent", "received"}) {
        if (!counts.contains(dir)) continue;
        for (const auto& [peer, n] : counts.at(dir).items()) {
          const int64_t v = n.is_string() ? std::stoll(n.get<std::string>()) : n.get<int64_t>();
          nlohmann::json& slot = by_shard[peer][dir];
          slot = (slot.is_null() ? int64_t{0} : slot.get<int64_t>()) + v;
        }
      }
    }
  }
  const double steps = num(s, "step");
  const int workers_seen = static_cast<int>(num(s, "workers_seen"));
  const double worker_bytes = bytes["worker"]["sent"].get<double>() +
                              bytes["worker"]["received"].get<double>();
  double test_accuracy = 0, final_loss = num(s, "train_loss");
  nlohmann::json evals = nlohmann::json::array();
  if (s.contains("evals")) {
    for (const auto& e : s.at("evals")) {
      evals.push_back({{"step", static_cast<int64_t>(num(e, "step"))},
                       {"epoch", static_cast<int64_t>(num(e, "epoch"))},
                       {"test_accuracy", num(e, "test_accuracy")},
                       {"test_loss", num(e, "test_loss")}, {"seconds", num(e, "seconds")}});
      test_accuracy = num(e, "test_accuracy");
    }
  }
  nlohmann::json accounting = nlohmann::json::array();
  if (s.contains("accounting")) {
    for (const auto& a : s.at("accounting")) {
      auto whole = [&](const char* key) { return static_cast<int64_t>(num(a, key)); };
      accounting.push_back({{"epoch", whole("epoch")},
                            {"samples_applied", whole("samples_applied")},
                            {"samples_released", whole("samples_released")},
                            {"samples_dropped", whole("samples_dropped")}});
    }
  }
  return {{"mode", options.mode},
          {"consistency", options.consistency},
          {"workers", options.workers},
          {"shards", options.mode == "ps" ? options.shards : 0},
          {"epochs", options.epochs},
          {"global_batch", options.global_batch},
          {"steps", static_cast<int64_t>(steps)},
          {"wall_seconds", num(s, "wall_seconds")},
          {"samples_per_second", num(s, "samples_per_second")},
          {"test_accuracy", test_accuracy},
          {"final_loss", final_loss},
          {"bytes", bytes},
          {"bytes_per_step_per_worker",
           steps > 0 && workers_seen > 0 ? worker_bytes / steps / workers_seen : 0.0},
          {"compute_seconds", num(s, "compute_seconds")},
          {"comm_seconds", num(s, "comm_seconds")},
          {"workers_seen", workers_seen},
          {"worker_bytes_by_peer", by_peer},
          {"worker_bytes_by_shard", by_shard},
          {"digest_checks", static_cast<int64_t>(num(s, "digest_checks"))},
          {"digest_mismatches", static_cast<int64_t>(num(s, "digest_mismatches"))},
          {"epochs_accounting", accounting},
          {"evals", evals}};
}

int RunLocalCluster(const LocalClusterOptions& o) {
  const std::string bin = ExecutableDir();
  std::string log_dir = o.log_dir;
  if (log_dir.empty()) {
    char pattern[] = "/tmp/ferry-local-XXXXXX";
    if (mkdtemp(pattern) == nullptr) {
      std::fprintf(stderr, "ferry local: cannot create a log directory in /tmp\n");
      return 1;
    }
    log_dir = pattern;
  } else {
    std::error_code error;
    std::filesystem::create_directories(log_dir, error);
    if (error) {
      std::fprintf(stderr, "ferry local: cannot create --log-dir %s: %s\n", log_dir.c_str(),
                   error.message().c_str());
      return 1;
    }
  }
  std::vector<Proc> procs;
  auto stop_all = [&]() {
    // Workers first (they leave cleanly), then shards, coordinator last.
    for (auto it = procs.rbegin(); it != procs.rend(); ++it) it->child.Signal(SIGTERM);
    for (auto it = procs.rbegin(); it != procs.rend(); ++it) it->child.Stop(absl::Seconds(5));
  };
  auto start = [&](const std::string& role, int index, const std::string& address,
                   std::vector<std::string> argv) -> bool {
    auto child = ChildProcess::Spawn(argv, absl::StrCat(log_dir, "/", role, index, ".log"));
    if (!child.ok()) {
      std::fprintf(stderr, "ferry local: %s\n", child.status().ToString().c_str());
      return false;
    }
    procs.push_back({role, index, address, std::move(*child)});
    return true;
  };

  auto coord_port = PickFreePort();
  if (!coord_port.ok()) return 1;
  const std::string coord = absl::StrCat("127.0.0.1:", *coord_port);
  std::vector<std::string> shard_addresses;
  const int shards = o.mode == "ps" ? o.shards : 0;
  for (int i = 0; i < shards; ++i) {
    auto port = PickFreePort();
    if (!port.ok()) return 1;
    shard_addresses.push_back(absl::StrCat("127.0.0.1:", *port));
  }
  std::vector<std::string> coord_argv = {bin + "/ferry-server", "--role", "coordinator",
                                         "--listen", coord, "--mode", o.mode,
                                         "--min-workers", std::to_string(o.workers),
                                         "--expected-workers", std::to_string(o.workers)};
  if (!shard_addresses.empty()) {
    std::string list;
    for (const auto& a : shard_addresses) list += (list.empty() ? "" : ",") + a;
    coord_argv.insert(coord_argv.end(), {"--shards", list});
  }
  coord_argv.insert(coord_argv.end(), o.job_args.begin(), o.job_args.end());
  bool ok = start("coordinator", 0, coord, coord_argv);
  for (int i = 0; ok && i < shards; ++i) {
    ok = start("ps", i, shard_addresses[i],
               {bin + "/ferry-server", "--role", "ps", "--listen", shard_addresses[i],
                "--coordinator", coord, "--shard-id", std::to_string(i)});
  }
  for (int i = 0; ok && i < o.workers; ++i) {
    ok = start("worker", i, "",
               {bin + "/ferry-worker", "--coordinator", coord, "--device", o.device,
                "--peer-listen", "127.0.0.1:0"});
  }
  WriteClusterFile(o.cluster_file, procs);
  if (!ok) {
    stop_all();
    return 1;
  }
  std::fprintf(stderr, "ferry local: %s mode, %d workers, %d shards, coordinator %s, logs in %s\n",
               o.mode.c_str(), o.workers, shards, coord.c_str(), log_dir.c_str());

  auto stub = v1::Coordinator::NewStub(MakeChannel(coord));
  ProgressPrinter progress(stderr);
  const absl::Time deadline = absl::Now() + absl::Seconds(o.timeout_s);
  int last_epoch_printed = -1;
  std::optional<v1::StatusResponse> final_status;
  int exit_code = 0;
  while (true) {
    if (WaitForShutdownSignal(absl::Milliseconds(500)) != 0) {
      std::fprintf(stderr, "\nferry local: interrupted, stopping every process\n");
      exit_code = 130;
      break;
    }
    for (Proc& p : procs) {
      std::optional<int> code = p.child.Poll();
      // Workers exit 0 when the job finishes; anything else is a failure.
      if (code && (p.role != "worker" || *code != 0)) {
        std::fprintf(stderr, "\nferry local: %s %d exited with code %d; see %s\n",
                     p.role.c_str(), p.index, *code, p.child.log_path().c_str());
        exit_code = 1;
      }
    }
    if (exit_code != 0) break;
    auto status = FetchStatus(*stub);
    if (status.ok()) {
      for (const v1::EvalPoint& e : status->evals()) {
        if (e.epoch() > last_epoch_printed) {
          last_epoch_printed = static_cast<int>(e.epoch());
          progress.Line(absl::StrFormat("epoch %2d done: step %d, test accuracy %.4f, %.1f s",
                                        e.epoch() + 1, e.step(), e.test_accuracy(), e.seconds()));
        }
      }
      progress.Update(status->job().epochs() > 0
                          ? (status->epoch() + status->epoch_progress()) / status->job().epochs()
                          : 0.0,
                      ProgressText(*status));
      if (status->finished()) {
        final_status = std::move(*status);
        break;
      }
    }
    if (absl::Now() > deadline) {
      std::fprintf(stderr, "\nferry local: timed out after %.0f s\n", o.timeout_s);
      exit_code = 1;
      break;
    }
  }

  if (final_status) {
    std::vector<std::string> shard_infos;
    for (const std::string& address : shard_addresses) {
      auto ps = v1::ParameterServer::NewStub(MakeChannel(address));
      grpc::ClientContext context;
      SetDeadline(context, absl::Seconds(2));
      v1::ShardInfoResponse info;
      if (ps->ShardInfo(&context, v1::ShardInfoRequest(), &info).ok()) {
        shard_infos.push_back(ToJson(info));
      }
    }
    const nlohmann::json summary = BuildSummary(o, ToJson(*final_status), shard_infos);
    progress.Line(absl::StrFormat(
        "done: %s %s, %d workers, %d steps in %.1f s, %.0f samples/s, test accuracy %.4f, "
        "%.0f bytes/step/worker",
        o.mode, o.consistency, o.workers, summary["steps"].get<int64_t>(),
        summary["wall_seconds"].get<double>(), summary["samples_per_second"].get<double>(),
        summary["test_accuracy"].get<double>(),
        summary["bytes_per_step_per_worker"].get<double>()));
    if (!o.summary_json.empty()) {
      std::ofstream out(o.summary_json);
      out << summary.dump(2) << "\n";
      if (!out) {
        std::fprintf(stderr, "ferry local: cannot write %s\n", o.summary_json.c_str());
        exit_code = 1;
      }
    }
  }
  stop_all();
  WriteClusterFile(o.cluster_file, procs);
  return exit_code;
}

}  // namespace ferry

#include "client/local_cluster.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/chaos_plan.h"
#include "client/child_process.h"
#include "client/log_dir_lock.h"
#include "client/process_supervisor.h"
#include "client/status_poller.h"
#include "client/status_view.h"
#include "client/supervision.h"
#include "client/worker_command.h"
#include "common/exit_codes.h"
#include "common/progress.h"
#include "common/shard_partitions.h"
#include "common/shutdown_signal.h"
#include "ferry/v1/coordinator.grpc.pb.h"
#include "ferry/v1/ps.grpc.pb.h"
#include "google/protobuf/util/json_util.h"
#include "proto/rpc_util.h"

namespace ferry {
namespace {

void Append(std::vector<std::string>& argv,
            const std::vector<std::string>& more) {
  argv.insert(argv.end(), more.begin(), more.end());
}

std::string MessageJson(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out;
}

std::string ProgressText(const v1::StatusResponse& s) {
  std::string test = "test acc -";
  if (s.evals_size() > 0) {
    const v1::EvalPoint& e = s.evals(s.evals_size() - 1);
    test = e.has_test_auc()
               ? absl::StrFormat("test auc %.4f", e.test_auc())
               : absl::StrFormat("test acc %.4f", e.test_accuracy());
  }
  return absl::StrFormat(
      "epoch %d/%d  step %d  %d workers  %.0f samples/s  loss %.4f  %s",
      s.epoch() + 1, s.job().epochs(), s.step(), s.members_size(),
      s.samples_per_second(), s.train_loss(), test);
}

// Creates the log directory (a new /tmp/ferry-local-* when none is given),
// locks it for this run (`lock`; refused while another run holds it) and
// clears the state directories a previous run left in it, so that the
// coordinator and the shards start a new job rather than resume an old one.
absl::StatusOr<std::string> PrepareLogDir(const LocalClusterOptions& o,
                                          std::optional<LogDirLock>& lock) {
  std::string log_dir = o.log_dir;
  if (log_dir.empty()) {
    char pattern[] = "/tmp/ferry-local-XXXXXX";
    if (mkdtemp(pattern) == nullptr) {
      return absl::UnavailableError("cannot create a log directory in /tmp");
    }
    log_dir = pattern;
  }
  std::error_code error;
  std::filesystem::create_directories(log_dir, error);
  if (error) {
    return absl::UnavailableError(absl::StrCat("cannot create --log-dir ",
                                               log_dir, ": ", error.message()));
  }
  absl::StatusOr<LogDirLock> locked = LogDirLock::Acquire(log_dir);
  if (!locked.ok()) return locked.status();
  lock.emplace(*std::move(locked));
  std::filesystem::remove_all(log_dir + "/coordinator", error);
  for (int i = 0; i < o.shards; ++i) {
    std::filesystem::remove_all(absl::StrCat(log_dir, "/ps", i), error);
  }
  return log_dir;
}

}  // namespace

int RunLocalCluster(const LocalClusterOptions& o) {
  const std::string bin = ExecutableDir();
  const int shards = o.mode == "ring" ? 0 : o.shards;
  // Colocated: the first `shards` workers are the shard processes psI.
  const int plain_workers = o.colocated_shards ? o.workers - shards : o.workers;
  if (absl::Status plan = ValidateChaosPlan(o.chaos, plain_workers, shards);
      !plan.ok()) {
    std::fprintf(stderr, "ferry local: %s\n",
                 std::string(plan.message()).c_str());
    return 2;
  }
  std::optional<LogDirLock> log_dir_lock;  // held until the run ends
  auto log_dir_or = PrepareLogDir(o, log_dir_lock);
  if (!log_dir_or.ok()) {
    std::fprintf(stderr, "ferry local: %s\n",
                 std::string(log_dir_or.status().message()).c_str());
    return 1;
  }
  const std::string log_dir = *log_dir_or;

  // Each shard process's partition addresses, and the job's shard
  // addresses in logical order (common/shard_partitions.h). Picked before
  // anything starts: the coordinator's --shards names them, and the shards
  // need the coordinator's address to start. The coordinator itself binds
  // a free port and reports it.
  auto picked = PickPartitionAddresses(shards, o.partitions);
  if (!picked.ok()) return 1;
  const std::vector<std::vector<std::string>> process_addresses = *picked;
  const std::vector<std::string> shard_addresses =
      LogicalShardAddresses(process_addresses);
  std::vector<std::string> coord_argv = {bin + "/ferry-server",
                                         "coordinator",
                                         "--mode",
                                         o.mode,
                                         "--start-workers",
                                         std::to_string(o.workers),
                                         "--expected-workers",
                                         std::to_string(o.workers),
                                         "--state-dir",
                                         log_dir + "/coordinator"};
  if (!shard_addresses.empty()) {
    coord_argv.insert(coord_argv.end(),
                      {"--shards", absl::StrJoin(shard_addresses, ",")});
  }
  if (o.mode == "ring" || o.mode == "hybrid") {  // every worker sees it
    coord_argv.insert(coord_argv.end(),
                      {"--ring-checkpoint-dir", log_dir + "/ring"});
  }
  coord_argv.insert(coord_argv.end(), o.job_args.begin(), o.job_args.end());
  coord_argv.insert(coord_argv.end(), o.ops_args.begin(), o.ops_args.end());

  ProgressPrinter progress(stderr);
  const absl::Time launch = absl::Now();
  SupervisorOptions so;
  so.restart_delay = absl::Seconds(o.restart_delay_s);
  so.max_restarts = o.max_restarts;
  so.cluster_file = o.cluster_file;
  so.log_dir = log_dir;
  so.ops_ports = true;
  so.worker_ops_ports = o.worker_command.empty();
  so.shards_train = o.colocated_shards;
  so.print = [&progress](const std::string& line) { progress.Line(line); };
  ProcessSupervisor procs(std::move(so), launch);

  // Until it listens: the time it takes to load the job (a data set, an
  // exported model) before binding.
  absl::StatusOr<std::string> coord_or = procs.StartServerOnFreePort(
      {ProcessName::Role::kCoordinator, 0}, "127.0.0.1", coord_argv,
      absl::Seconds(std::max(o.timeout_s, 1.0)));
  if (!coord_or.ok()) {
    // A configuration it refused is told the way the job loop tells it.
    const absl::Status why = procs.Tick(absl::Now());
    std::fprintf(
        stderr, "ferry local: %s\n",
        std::string(absl::IsInvalidArgument(why)
                        ? absl::StrCat("configuration error: ", why.message())
                        : coord_or.status().message())
            .c_str());
    procs.StopAll();
    return absl::IsInvalidArgument(why) ? kExitConfig : 1;
  }
  const std::string coord = *coord_or;
  std::vector<std::string> worker_argv = {
      bin + "/ferry-worker", "--coordinator", coord, "--device", o.device,
      "--peer-listen",       "127.0.0.1:0"};
  worker_argv.insert(worker_argv.end(), o.link_args.begin(), o.link_args.end());
  worker_argv.insert(worker_argv.end(), o.ops_args.begin(), o.ops_args.end());
  if (o.worker_command.empty()) {
    procs.SetWorkerArgv(worker_argv);
  } else {
    procs.SetWorkerArgv(HostedWorkerArgv(o.worker_command, coord, bin,
                                         getenv("PYTHONPATH"),
                                         getenv("GLIBC_TUNABLES")));
  }

  absl::Status started = absl::OkStatus();
  for (int i = 0; started.ok() && i < shards; ++i) {
    std::vector<std::string> ps_argv;
    if (o.colocated_shards) {  // a worker that hosts shard process i
      const std::vector<std::string> shard = {
          std::to_string(i), absl::StrJoin(process_addresses[i], ","),
          std::to_string(o.partitions), absl::StrCat(log_dir, "/ps", i)};
      if (o.worker_command.empty()) {
        ps_argv = worker_argv;
        Append(ps_argv, {"--host-shard", shard[0], "--shard-listen", shard[1],
                         "--shard-partitions", shard[2],
                         "--shard-checkpoint-dir", shard[3]});
      } else {  // ferry.torch reads ferry-worker's flags from FERRY_*
        ps_argv = HostedWorkerArgv(
            o.worker_command, coord, bin, getenv("PYTHONPATH"),
            getenv("GLIBC_TUNABLES"),
            {absl::StrCat("FERRY_HOST_SHARD=", shard[0]),
             absl::StrCat("FERRY_SHARD_LISTEN=", shard[1]),
             absl::StrCat("FERRY_SHARD_PARTITIONS=", shard[2]),
             absl::StrCat("FERRY_SHARD_CHECKPOINT_DIR=", shard[3])});
      }
    } else {
      ps_argv = {bin + "/ferry-server",
                 "ps",
                 "--listen",
                 absl::StrJoin(process_addresses[i], ","),
                 "--partitions",
                 std::to_string(o.partitions),
                 "--coordinator",
                 coord,
                 "--shard-id",
                 std::to_string(i),
                 "--checkpoint-dir",
                 absl::StrCat(log_dir, "/ps", i)};
      Append(ps_argv, o.link_args);
      Append(ps_argv, o.ops_args);
    }
    started = procs.StartServer({ProcessName::Role::kPs, i},
                                process_addresses[i].front(), ps_argv);
  }
  for (int i = 0; started.ok() && i < plain_workers; ++i)
    started = procs.StartWorker();
  if (!started.ok()) {
    std::fprintf(stderr, "ferry local: %s\n",
                 std::string(started.message()).c_str());
    procs.StopAll();
    return 1;
  }
  std::fprintf(stderr,
               "ferry local: %s mode, %d workers, %d shards%s, coordinator %s, "
               "logs in %s\n",
               o.mode.c_str(), o.workers, shards,
               o.colocated_shards ? " (colocated: ps0.. also train)" : "",
               coord.c_str(), log_dir.c_str());
  if (shards > 0 && o.partitions > 1 && o.link_args.empty()) {
    std::fprintf(stderr,
                 "ferry local: note: %d partitions per shard without link "
                 "emulation: partitions overlap pulls with pushes on the "
                 "links; on loopback they only add streams (measured 0.55x "
                 "at 4 partitions, docs/benchmarks.md)\n",
                 o.partitions);
  }
  if (!o.chaos.empty()) {
    const std::string plan =
        absl::StrJoin(o.chaos, ",", [](std::string* out, const ChaosEvent& e) {
          out->append(e.ToString());
        });
    std::fprintf(
        stderr,
        "ferry local: chaos plan (times from launch, or at a step): %s\n",
        plan.c_str());
  }

  StatusPoller poller(coord, absl::Seconds(2));
  int coordinator_starts = procs.coordinator_starts();
  const absl::Time deadline = launch + absl::Seconds(o.timeout_s);
  size_t next_event = 0;
  absl::Time workers_gone_since = absl::InfiniteFuture();
  int last_epoch_printed = -1;
  int64_t steps_seen = 0;  // the coordinator's step, for chaos events at a step
  bool training_done = false;     // the coordinator said so: final evaluation
  std::string shown_state_error;  // the coordinator's, as last printed
  std::optional<v1::StatusResponse> final_status;
  int exit_code = 0;
  auto fail = [&](const std::string& why) {
    progress.Line(absl::StrFormat("ferry local: [%7.2fs] %s",
                                  absl::ToDoubleSeconds(absl::Now() - launch),
                                  why));
    exit_code = 1;
  };
  while (exit_code == 0) {
    absl::Time now = absl::Now();
    // An event is due at its time, or once the job applied its step.
    auto due = [&](const ChaosEvent& e) {
      return e.at_step >= 0 ? steps_seen >= e.at_step : launch + e.at <= now;
    };
    while (next_event < o.chaos.size() && due(o.chaos[next_event])) {
      if (absl::Status s = procs.Apply(o.chaos[next_event++], now); !s.ok()) {
        fail(std::string(s.message()));
        break;
      }
    }
    if (exit_code != 0) break;
    if (absl::Status s = procs.Tick(now); !s.ok()) {
      if (absl::IsInvalidArgument(s)) {
        fail(absl::StrCat("configuration error: ", s.message()));
        exit_code = kExitConfig;
      } else {
        fail(absl::StrCat("giving up: ", s.message()));
      }
      break;
    }
    if (procs.coordinator_starts() != coordinator_starts) {
      coordinator_starts = procs.coordinator_starts();
      poller.Reconnect();
    }
    const bool step_event_pending =
        next_event < o.chaos.size() && o.chaos[next_event].at_step >= 0;
    // A chaos event at a step: poll every 20 ms, so that a job that runs
    // a step every few milliseconds does not pass the step between polls.
    const absl::Duration poll_every =
        absl::Milliseconds(step_event_pending ? 20 : 500);
    poller.MaybeStart(poll_every);
    if (auto status = poller.Take(); status && status->ok()) {
      for (const v1::EvalPoint& e : (*status)->evals()) {
        if (e.epoch() > last_epoch_printed) {
          last_epoch_printed = static_cast<int>(e.epoch());
          progress.Line(absl::StrFormat("epoch %2d done: step %d, %s, %.1f s",
                                        e.epoch() + 1, e.step(),
                                        EvalScoresText(e), e.seconds()));
        }
      }
      const v1::StatusResponse& st = **status;
      steps_seen = std::max(steps_seen, st.step());
      if (st.state_error() != shown_state_error) {  // said once a change
        shown_state_error = st.state_error();
        progress.Line(absl::StrCat(
            "ferry local: ",
            shown_state_error.empty()
                ? std::string("the coordinator saves its state again")
                : absl::StrCat("warning: ", shown_state_error)));
      }
      training_done |= st.training_done();
      progress.Update(
          st.job().epochs() > 0
              ? (st.epoch() + st.epoch_progress()) / st.job().epochs()
              : 0.0,
          ProgressText(st));
      if (st.finished()) {
        final_status = std::move(**status);
        if (!final_status->final_eval_error().empty()) {
          // Its last weights were never scored: not a success.
          fail(absl::StrCat("the job's final evaluation failed: ",
                            final_status->final_eval_error(),
                            " (see coordinator.log)"));
        }
        break;
      }
      // The coordinator's verdict that the job cannot go on (read from the
      // JSON form, so this builds whether or not the field exists yet).
      const nlohmann::json j = nlohmann::json::parse(MessageJson(st));
      if (j.contains("error") && j["error"].is_string() &&
          !j["error"].get<std::string>().empty()) {
        fail(absl::StrCat("the coordinator says the job cannot go on: ",
                          j["error"].get<std::string>()));
        break;
      }
    }
    const int live = procs.LiveWorkers();
    if (live > 0) {
      workers_gone_since = absl::InfiniteFuture();
    } else if (workers_gone_since == absl::InfiniteFuture()) {
      workers_gone_since = now;
    }
    WorkerPresence presence;
    presence.live_workers = live;
    for (size_t i = next_event; i < o.chaos.size(); ++i) {
      presence.join_pending |= o.chaos[i].action == ChaosAction::kJoin;
    }
    presence.without_workers =
        live > 0 ? absl::ZeroDuration() : now - workers_gone_since;
    presence.grace = absl::Seconds(o.no_worker_grace_s);
    presence.training_done = training_done;
    if (JobHasNoWorkersLeft(presence)) {
      fail(
          absl::StrFormat("every worker is gone, the job is unfinished and no "
                          "join is scheduled "
                          "(waited %.0f s); see the worker logs in %s",
                          o.no_worker_grace_s, log_dir));
      break;
    }
    if (now > deadline) {
      fail(absl::StrFormat("timed out after %.0f s", o.timeout_s));
      break;
    }
    absl::Time wake =
        std::min(now + std::min(poll_every, absl::Milliseconds(100)),
                 procs.NextRestart());
    if (next_event < o.chaos.size() && o.chaos[next_event].at_step < 0) {
      wake = std::min(wake, launch + o.chaos[next_event].at);
    }
    if (WaitForShutdownSignal(
            std::max(wake - absl::Now(), absl::Milliseconds(1))) != 0) {
      progress.Line("ferry local: interrupted, stopping every process");
      exit_code = 130;
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
        shard_infos.push_back(MessageJson(info));
      }
    }
    nlohmann::json summary =
        BuildSummary(o, MessageJson(*final_status), shard_infos);
    summary["workers_started"] =
        procs.workers_started() + (o.colocated_shards ? shards : 0);
    summary["colocated_shards"] = o.colocated_shards;
    summary["chaos_events"] = procs.ChaosEventsJson();
    summary["restarts"] = procs.RestartsJson();
    // Every process's peak resident memory, and the workers' largest.
    summary["peak_rss_mib"] = procs.PeakRssJson();
    double worker_peak = 0;
    for (const auto& [name, mib] : summary["peak_rss_mib"].items()) {
      if (absl::StartsWith(name, "worker") ||
          (o.colocated_shards && absl::StartsWith(name, "ps")))
        worker_peak = std::max(worker_peak, mib.get<double>());
    }
    summary["worker_peak_rss_mib"] = worker_peak;
    // A job whose model is its workers' is scored only by a worker that
    // evaluates (job.evaluate in a PyTorch script).
    const bool worker_scored =
        !final_status->job().model_from_worker() ||
        (final_status->evals_size() > 0 &&
         final_status->evals(final_status->evals_size() - 1).final());
    const std::string scores =
        !worker_scored ? std::string(
                             "no test evaluation (the model is the script's: "
                             "job.evaluate scores it)")
        : !final_status->final_eval_error().empty()
            ? std::string("no final test score (its evaluation failed)")
        : summary.contains("test_auc")
            ? absl::StrFormat("test auc %.4f logloss %.4f",
                              summary["test_auc"].get<double>(),
                              summary["test_logloss"].get<double>())
            : absl::StrFormat("test accuracy %.4f",
                              summary["test_accuracy"].get<double>());
    if (summary.contains("pipeline")) {
      std::string roles;
      for (const auto& r : summary["pipeline"]["roles"]) {
        absl::StrAppendFormat(
            &roles, "%s%s: %d steps, idle %.2f", roles.empty() ? "" : "; ",
            r["role"].get<std::string>(), r["steps"].get<int64_t>(),
            r["idle_share"].get<double>());
      }
      progress.Line(absl::StrFormat(
          "pipeline: bubble %.3f (%s)",
          summary["pipeline"]["measured_bubble"].get<double>(), roles));
    }
    // The coordinator's wall clock restarts with it: the job's is ferry
    // local's, from launch.
    progress.Line(absl::StrFormat(
        "done: %s %s, %d workers, %d steps in %.1f s%s, %.0f samples/s, %s, "
        "%.0f bytes/step/worker",
        o.mode, o.consistency, o.workers, summary["steps"].get<int64_t>(),
        summary["coordinator_restarts"].get<int64_t>() > 0
            ? absl::ToDoubleSeconds(absl::Now() - launch)
            : summary["wall_seconds"].get<double>(),
        summary["coordinator_restarts"].get<int64_t>() > 0
            ? " (launch to end: the coordinator restarted)"
            : "",
        summary["samples_per_second"].get<double>(), scores,
        summary["bytes_per_step_per_worker"].get<double>()));
    progress.Line(absl::StrFormat(
        "time: start-up %.2f s, then %d samples in %.2f s (%.4f s per step, "
        "the steps' own clocks), final evaluation %.2f s",
        summary["startup_seconds"].get<double>(),
        summary["window_samples"].get<int64_t>(),
        summary["window_seconds"].get<double>(),
        summary["step_seconds"].get<double>(),
        summary["eval_seconds"].get<double>()));
    for (const auto& reason : summary["invalid"]) {
      progress.Line("INVALID measurement: " + reason.get<std::string>());
    }
    if (!o.summary_json.empty()) {
      std::ofstream out(o.summary_json);
      out << summary.dump(2) << "\n";
      if (!out) {
        std::fprintf(stderr, "ferry local: cannot write %s\n",
                     o.summary_json.c_str());
        exit_code = 1;
      }
    }
  }
  procs.StopAll();
  return exit_code;
}

}  // namespace ferry

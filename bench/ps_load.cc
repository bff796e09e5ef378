// ferry-ps-load: load test of real PS shard processes. `--workers` simulated
// workers push and pull concurrently for `--seconds`; the tool reports
// throughput, latency percentiles and errors, and watches the shards'
// anonymous resident memory, threads and file descriptors for growth.
//
// Processes: a coordinator (`ferry-server coordinator`, async PS job
// of `--model` on a synthetic dataset, no workers of its own) and `--shards`
// shards (`ferry-server ps`), started from --server-bin (default:
// next to this binary) on 127.0.0.1, logs in --log-dir. They are stopped
// (SIGTERM) at the end and die with this process (PR_SET_PDEATHSIG).
//
// Load: every simulated worker has its own GrpcParameterClient (the options
// a ferry-worker derives from the job, its own channel and TCP connection
// per shard, retries off, every call with the --rpc-timeout deadline) and
// loops push-then-pull over the real wire protocol: Push of the whole flat
// gradient (the job's chunks and compression: fp32 by default), then
// Pull of the whole model (min_version = the version it last pulled, so a
// pull never waits for another worker). The job is async: a push is applied
// on arrival (the shard's own work per push: staging, finiteness check,
// optimizer update, new snapshot), so the shard is the bottleneck with no
// coordinator in the loop. Gradients alternate sign so the weights stay
// bounded however long it runs.
//
// Measurement: latencies and throughput count the operations completed
// between the end of --warmup and --seconds; errors count over the whole
// run. Process figures (/proc: VmRSS, RssAnon, Threads, fds, CPU) are
// sampled every --sample-interval; the reported points are: start (before
// the load), warm (end of warm-up), mid (halfway through the measured
// window), end (last instant under load) and idle (--idle-seconds after
// every worker disconnected). Memory is judged on RssAnon (heap and
// stacks: where a leak shows; VmRSS adds file-backed pages). It only ever
// rises here (the glibc settings of ferry-server do not trim the heap): to
// a high-water mark set by how many message buffers happen to be alive at
// once, in steps that get rarer as the run goes on. A leak is growth that
// goes on, so the check compares the end of the measured window with its
// middle: the first half of the window is settling time, the second half
// must be flat but for such steps. Only runs of minutes give the high-water
// mark time to settle; a short run's memory verdict means little.
//
// Verdict (exit 0 PASS, 1 FAIL, 2 bad flags or the cluster did not start):
// no error of any kind, no stall (no operation completing for
// --stall-seconds), every process alive, every shard's version == pushes
// accepted; and unless --no-growth-check, for every process, RssAnon end -
// mid <= the largest of --max-rss-growth-mib, --max-rss-growth-pct % of
// mid RssAnon and --max-rss-growth-messages x its message bytes (shards:
// one push of their chunks), threads and fds end - warm <=
// --max-thread-growth / --max-fd-growth, and fds idle - start <=
// --max-fd-growth (connections are released). RSS end - warm is reported,
// not judged. A shard's rejected pushes are reported, not judged: with
// retries off each is also an error of the worker that sent it.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "bench/load_cluster.h"
#include "bench/load_driver.h"
#include "bench/proc_probe.h"
#include "client/child_process.h"
#include "common/allocator_tuning.h"
#include "common/sharding.h"
#include "ferry/v1/ps.grpc.pb.h"
#include "model/model_params.h"
#include "model/model_presets.h"
#include "nlohmann/json.hpp"
#include "proto/rpc_util.h"
#include "ps/ps_client.h"
#include "worker/job_options.h"

namespace ferry {
namespace {

struct Flags {
  int workers = 64;
  double seconds = 30;
  double warmup = 10;
  int shards = 1;
  std::string model = "784-256-128-10";
  int64_t max_chunk_elements = 0;  // 0: the coordinator's default
  double rpc_timeout_s = 20;
  double stall_s = 10;
  double sample_interval_s = 1;
  double idle_s = 3;
  double start_timeout_s = 60;
  double max_rss_growth_mib = 8;
  double max_rss_growth_pct = 10;
  double max_rss_growth_messages = 16;
  int max_thread_growth = 8;
  int max_fd_growth = 8;
  bool growth_check = true;
  std::string json;
  std::string server_bin;  // default: ferry-server next to this binary
  std::string log_dir;     // default: a new /tmp/ferry-ps-load-*
};

// The shards' own account after the run (ShardInfo): every push the
// workers saw accepted applied once. Rejected and pending counts are
// reported only: a rejected push is also the sending worker's error, and no
// pull waits (each asks for the version it last pulled).
nlohmann::json CheckShards(const LoadCluster& cluster, int64_t pushes_ok,
                           std::vector<std::string>& failures) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < cluster.shard_addresses.size(); ++i) {
    const absl::StatusOr<v1::ShardInfoResponse> queried =
        QueryShardInfo(cluster, i, absl::Seconds(5));
    if (!queried.ok()) {
      failures.push_back(queried.status().ToString());
      continue;
    }
    const v1::ShardInfoResponse& info = *queried;
    out.push_back({{"shard", i},
                   {"version", info.version()},
                   {"rejected_pushes", info.rejected_pushes()},
                   {"pending_pulls", info.pending_pulls()}});
    std::printf(
        "shard ps%zu: version %lld (pushes accepted %lld), rejected "
        "pushes %lld, pending pulls %lld\n",
        i, static_cast<long long>(info.version()),
        static_cast<long long>(pushes_ok),
        static_cast<long long>(info.rejected_pushes()),
        static_cast<long long>(info.pending_pulls()));
    if (info.version() != pushes_ok) {
      failures.push_back(absl::StrCat("ps", i, " is at version ",
                                      info.version(), " but the workers had ",
                                      pushes_ok, " pushes accepted"));
    }
  }
  return out;
}

// Prints the processes' points and checks their growth (unless
// --no-growth-check); returns their JSON. `chunks`: the job's placement
// (a shard's message size is the bytes of its chunks).
nlohmann::json CheckProcesses(const Flags& f, const LoadCluster& cluster,
                              const std::vector<Chunk>& chunks,
                              const LoadRun& run,
                              std::vector<std::string>& failures) {
  std::vector<int64_t> message_bytes(cluster.procs.size(), 0);
  for (const Chunk& c : chunks) {  // procs: coordinator, ps0, ps1, ...
    message_bytes[c.shard + 1] +=
        c.length * static_cast<int64_t>(sizeof(float));
  }
  nlohmann::json out = nlohmann::json::array();
  std::printf(
      "process      pid   RSS MiB start/warm/mid/end/idle          "
      "RssAnon mid/end   threads s/w/e/i   fds s/w/e/i   CPU cores "
      "(window)\n");
  for (size_t i = 0; i < cluster.procs.size(); ++i) {
    const ProcSeries& s = run.series[i];
    auto at = [&](const char* p) {
      auto it = s.points.find(p);
      return it == s.points.end() ? ProcSample{} : it->second;
    };
    const ProcSample st = at("start"), wa = at("warm"), mid = at("mid"),
                     en = at("end"), id = at("idle");
    int64_t peak_kib = 0;  // VmRSS
    nlohmann::json samples = nlohmann::json::array();
    for (const ProcSample& x : s.samples) {
      peak_kib = std::max(peak_kib, x.rss_kib);
      samples.push_back(
          {x.t_s, x.rss_kib, x.anon_kib, x.threads, x.fds, x.cpu_s});
    }
    const double cores =
        run.window_s > 0 ? (en.cpu_s - wa.cpu_s) / run.window_s : 0;
    const int64_t anon_growth = en.anon_kib - mid.anon_kib;  // judged
    const double anon_limit_kib = std::max(
        {f.max_rss_growth_mib * 1024, f.max_rss_growth_pct / 100 * mid.anon_kib,
         f.max_rss_growth_messages * message_bytes[i] / 1024.0});
    const std::string& who = cluster.names[i];
    std::printf(
        "  %-11s %6d  %6.1f/%6.1f/%6.1f/%6.1f/%6.1f  %6.1f/%6.1f  "
        "%4lld/%lld/%lld/%lld  %4lld/%lld/%lld/%lld   %.2f\n",
        who.c_str(), cluster.procs[i].pid(), st.rss_kib / 1024.0,
        wa.rss_kib / 1024.0, mid.rss_kib / 1024.0, en.rss_kib / 1024.0,
        id.rss_kib / 1024.0, mid.anon_kib / 1024.0, en.anon_kib / 1024.0,
        static_cast<long long>(st.threads), static_cast<long long>(wa.threads),
        static_cast<long long>(en.threads), static_cast<long long>(id.threads),
        static_cast<long long>(st.fds), static_cast<long long>(wa.fds),
        static_cast<long long>(en.fds), static_cast<long long>(id.fds), cores);
    if (f.growth_check && !s.gone) {
      if (anon_growth > anon_limit_kib) {
        failures.push_back(absl::StrFormat(
            "%s RssAnon grew %.1f MiB in the second half of the measured "
            "window (limit %.1f MiB): still growing",
            who, anon_growth / 1024.0, anon_limit_kib / 1024));
      }
      if (en.threads - wa.threads > f.max_thread_growth) {
        failures.push_back(absl::StrCat(who, " threads ", wa.threads, " -> ",
                                        en.threads, " after warm-up"));
      }
      if (en.fds - wa.fds > f.max_fd_growth) {
        failures.push_back(absl::StrCat(who, " fds ", wa.fds, " -> ", en.fds,
                                        " after warm-up"));
      }
      if (id.fds - st.fds > f.max_fd_growth) {
        failures.push_back(absl::StrCat(who, " fds ", st.fds, " at start, ",
                                        id.fds, " once every worker left"));
      }
    }
    nlohmann::json points = nlohmann::json::object();
    for (const auto& [name, p] : s.points) {
      points[name] = {{"t_s", p.t_s},
                      {"rss_kib", p.rss_kib},
                      {"rss_anon_kib", p.anon_kib},
                      {"threads", p.threads},
                      {"fds", p.fds},
                      {"cpu_s", p.cpu_s}};
    }
    out.push_back({{"name", who},
                   {"pid", cluster.procs[i].pid()},
                   {"points", points},
                   {"peak_rss_kib", peak_kib},
                   {"rss_growth_after_warmup_kib", en.rss_kib - wa.rss_kib},
                   {"rss_growth_second_half_kib", en.rss_kib - mid.rss_kib},
                   {"rss_anon_growth_second_half_kib", anon_growth},
                   {"rss_anon_growth_limit_kib", anon_limit_kib},
                   {"cpu_cores_in_window", cores},
                   {"samples_t_rss_anon_kib_threads_fds_cpu_s", samples}});
  }
  return out;
}

nlohmann::json LatencyJson(const LatencySummary& s) {
  return {{"count", s.count}, {"mean_ms", s.mean}, {"p50_ms", s.p50},
          {"p90_ms", s.p90},  {"p99_ms", s.p99},   {"max_ms", s.max}};
}

// Prints the results and the verdict, writes --json; returns the exit code.
int Report(const Flags& f, const LoadCluster& cluster, int64_t parameters,
           const std::vector<Chunk>& chunks, LoadRun& run) {
  std::vector<float> push_ms, pull_ms;
  std::map<int, int64_t> errors;
  std::map<int, std::string> first_error;
  int64_t pushes_ok = 0, pulls_ok = 0;
  for (WorkerStats& s : run.stats) {
    push_ms.insert(push_ms.end(), s.push_ms.begin(), s.push_ms.end());
    pull_ms.insert(pull_ms.end(), s.pull_ms.begin(), s.pull_ms.end());
    pushes_ok += s.pushes_ok;
    pulls_ok += s.pulls_ok;
    for (const auto& [code, count] : s.errors) errors[code] += count;
    for (const auto& [code, text] : s.first_error)
      first_error.emplace(code, text);
  }
  const LatencySummary push = Summarize(push_ms), pull = Summarize(pull_ms);
  const double w = run.window_s > 0 ? run.window_s : 1;
  const double sent = static_cast<double>(run.window_bytes.sent);
  const double received = static_cast<double>(run.window_bytes.received);
  std::printf(
      "measured window %.1f s: %.1f pushes/s, %.1f pulls/s, %.1f MB/s "
      "payload (%.1f sent + %.1f received; MB = 1e6 bytes)\n",
      run.window_s, push.count / w, pull.count / w, (sent + received) / w / 1e6,
      sent / w / 1e6, received / w / 1e6);
  std::printf(
      "latency ms      p50      p90      p99      max     mean  count\n");
  for (const auto* s : {&push, &pull}) {
    std::printf("  %-6s %8.2f %8.2f %8.2f %8.2f %8.2f  %lld\n",
                s == &push ? "push" : "pull", s->p50, s->p90, s->p99, s->max,
                s->mean, static_cast<long long>(s->count));
  }
  std::vector<std::string>& failures = run.failures;
  int64_t error_total = 0;
  nlohmann::json errors_json = nlohmann::json::object();
  std::string error_line;
  for (const auto& [code, count] : errors) {
    error_total += count;
    const std::string name =
        absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
    errors_json[name] = {{"count", count}, {"first", first_error[code]}};
    absl::StrAppend(&error_line, "  ", name, "=", count);
    failures.push_back(
        absl::StrCat(count, " x ", name, " (first: ", first_error[code], ")"));
  }
  std::printf("errors: %lld%s  (whole run: %lld pushes, %lld pulls ok)\n",
              static_cast<long long>(error_total), error_line.c_str(),
              static_cast<long long>(pushes_ok),
              static_cast<long long>(pulls_ok));
  if (run.stalled) {
    failures.push_back(absl::StrFormat(
        "stall: no push or pull completed for %.1f s", run.stalled_for_s));
  }
  nlohmann::json procs_json = CheckProcesses(f, cluster, chunks, run, failures);
  nlohmann::json shards_json = CheckShards(cluster, pushes_ok, failures);
  const double self_cores = run.self_cpu_s / w;
  std::printf(
      "load generator: %.2f CPU cores in the window; machine: %ld "
      "online CPUs\n",
      self_cores, sysconf(_SC_NPROCESSORS_ONLN));
  for (const std::string& why : failures)
    std::printf("FAIL: %s\n", why.c_str());
  const bool pass = failures.empty();
  std::printf("verdict: %s\n", pass ? "PASS" : "FAIL");
  if (f.json.empty()) return pass ? 0 : 1;
  const nlohmann::json j = {
      {"bench", "ps_load"},
      {"consistency", "async"},
      {"workers", f.workers},
      {"shards", f.shards},
      {"model", cluster.job.model()},
      {"parameters", parameters},
      {"chunks", chunks.size()},
      {"seconds", f.seconds},
      {"warmup_s", f.warmup},
      {"rpc_timeout_s", f.rpc_timeout_s},
      {"window_s", run.window_s},
      {"pushes_per_s", push.count / w},
      {"pulls_per_s", pull.count / w},
      {"payload_bytes_per_s", (sent + received) / w},
      {"payload_sent_bytes_per_s", sent / w},
      {"payload_received_bytes_per_s", received / w},
      {"push_latency", LatencyJson(push)},
      {"pull_latency", LatencyJson(pull)},
      {"pushes_ok", pushes_ok},
      {"pulls_ok", pulls_ok},
      {"errors", errors_json},
      {"error_total", error_total},
      {"stalled", run.stalled},
      {"processes", procs_json},
      {"shard_info", shards_json},
      {"load_generator_cpu_cores", self_cores},
      {"online_cpus", sysconf(_SC_NPROCESSORS_ONLN)},
      {"growth_check", f.growth_check},
      {"thresholds",
       {{"rss_growth_mib", f.max_rss_growth_mib},
        {"rss_growth_pct", f.max_rss_growth_pct},
        {"rss_growth_messages", f.max_rss_growth_messages},
        {"thread_growth", f.max_thread_growth},
        {"fd_growth", f.max_fd_growth},
        {"stall_s", f.stall_s}}},
      {"failures", failures},
      {"verdict", pass ? "PASS" : "FAIL"},
      {"log_dir", f.log_dir}};
  std::ofstream out(f.json);
  out << j.dump(2) << "\n";
  if (!out) {
    std::fprintf(stderr, "ferry-ps-load: cannot write %s\n", f.json.c_str());
    return 1;
  }
  return pass ? 0 : 1;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "ferry-ps-load: %s\n", status.ToString().c_str());
  return 2;
}

// Single flags are checked by CLI11 (main); this checks what spans flags
// or needs parsing, then runs. Exit code as in the header.
int Run(Flags f) {
  if (f.warmup >= f.seconds) {
    return Fail(absl::InvalidArgumentError(absl::StrFormat(
        "bad flags: --warmup (%g) must be less than --seconds (%g)", f.warmup,
        f.seconds)));
  }
  // The model, as a worker builds it (the coordinator parses --model the
  // same way), for the layout of its parameters.
  auto model = ResolveModelSpec(f.model);
  if (!model.ok()) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("bad flags: --model: ", model.status().message())));
  }
  auto layout = ModelJobLayout(*model);
  if (!layout.ok()) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("bad flags: --model: ", layout.status().message())));
  }
  if (f.server_bin.empty()) f.server_bin = ExecutableDir() + "/ferry-server";
  if (access(f.server_bin.c_str(), X_OK) != 0) {
    return Fail(absl::NotFoundError(
        absl::StrCat(f.server_bin, " is not an executable (--server-bin)")));
  }
  if (f.log_dir.empty()) {
    char pattern[] = "/tmp/ferry-ps-load-XXXXXX";
    if (mkdtemp(pattern) == nullptr) {
      return Fail(absl::UnavailableError("cannot create a log directory"));
    }
    f.log_dir = pattern;
  } else {
    std::error_code error;
    std::filesystem::create_directories(f.log_dir, error);
    if (error) {
      return Fail(absl::UnavailableError(
          absl::StrCat("cannot create --log-dir: ", error.message())));
    }
  }
  LoadClusterOptions options;
  options.server_bin = f.server_bin;
  options.log_dir = f.log_dir;
  options.model = f.model;
  options.shards = f.shards;
  options.max_chunk_elements = f.max_chunk_elements;
  options.start_timeout = absl::Seconds(f.start_timeout_s);
  LoadCluster cluster;
  if (absl::Status s = StartLoadCluster(options, cluster); !s.ok())
    return Fail(s);

  // The client options a worker derives from the job (ids, shards, chunks,
  // compression); the worker id, deadline and retries are set per worker.
  auto base = ParameterClientOptionsForJob(cluster.job, "", *layout);
  if (!base.ok()) return Fail(base.status());
  const std::vector<Chunk>& chunks = base->chunks;
  std::vector<std::unique_ptr<GrpcParameterClient>> clients;
  for (int w = 0; w < f.workers; ++w) {
    GrpcParameterClientOptions o = *base;
    o.worker_id = absl::StrCat("load", w);
    o.rpc_timeout = absl::Seconds(f.rpc_timeout_s);
    o.retry.budget = absl::ZeroDuration();  // every failure counts
    auto client = GrpcParameterClient::Create(std::move(o));
    if (!client.ok()) return Fail(client.status());
    clients.push_back(*std::move(client));
  }
  const int64_t n = clients[0]->num_elements();
  std::printf(
      "ferry-ps-load: %d workers x %g s (warm-up %g s) against %d PS shard "
      "process(es), async, model %s (%lld parameters, %.2f MB per push and "
      "per pull, %zu chunks); logs in %s\n",
      f.workers, f.seconds, f.warmup, f.shards, cluster.job.model().c_str(),
      static_cast<long long>(n), 4e-6 * static_cast<double>(n), chunks.size(),
      f.log_dir.c_str());
  std::fflush(stdout);
  LoadSchedule schedule;
  schedule.seconds = f.seconds;
  schedule.warmup = f.warmup;
  schedule.rpc_timeout_s = f.rpc_timeout_s;
  schedule.stall_s = f.stall_s;
  schedule.sample_interval_s = f.sample_interval_s;
  schedule.idle_s = f.idle_s;
  LoadRun run = DriveLoad(schedule, cluster, std::move(clients));
  return Report(f, cluster, n, chunks, run);
}

}  // namespace
}  // namespace ferry

int main(int argc, char** argv) {
  ferry::TuneAllocatorForLargeMessages(argv);  // as ferry-worker runs
  ferry::Flags f;
  CLI::App app{
      "ferry-ps-load: --workers simulated workers (one gRPC channel each) "
      "push then pull the whole model against real ferry-server PS shard "
      "processes of an async job for --seconds; reports throughput, latency "
      "percentiles, errors and the shards' memory/threads/fds; exit 1 on any "
      "error, a stall or growth after warm-up (memory: RssAnon in the second "
      "half of the window; judge it on runs of minutes), 2 on bad flags."};
  app.add_option("--workers", f.workers, "simulated workers")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--seconds", f.seconds, "load duration, warm-up included")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", f.warmup,
                 "seconds before the measured window (< --seconds)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--shards", f.shards, "PS shard processes")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option(
         "--model", f.model,
         "the job's model: a preset, JSON file or MLP sizes (message size)")
      ->capture_default_str();
  app.add_option("--max-chunk-elements", f.max_chunk_elements,
                 "largest wire chunk in floats (0: the coordinator's default)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--rpc-timeout", f.rpc_timeout_s,
                 "deadline of every push and pull, s")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--stall-seconds", f.stall_s,
                 "fail when no operation completes for this long")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--sample-interval", f.sample_interval_s,
                 "seconds between /proc samples")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--idle-seconds", f.idle_s,
                 "wait after the workers disconnect before the idle sample")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--start-timeout", f.start_timeout_s,
                 "seconds for the coordinator and shards to become ready")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-rss-growth-mib", f.max_rss_growth_mib,
                 "RssAnon growth allowed in the second half of the measured "
                 "window (the largest of this, --max-rss-growth-pct and "
                 "--max-rss-growth-messages); the memory verdict needs runs "
                 "of minutes (--seconds), a short run's means little")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-rss-growth-pct", f.max_rss_growth_pct,
                 "the same in % of the RssAnon halfway through the window")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-rss-growth-messages", f.max_rss_growth_messages,
                 "the same in shard messages (one push of the shard's "
                 "chunks): the buffers whose high-water mark may still rise")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-thread-growth", f.max_thread_growth,
                 "thread growth after warm-up allowed")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-fd-growth", f.max_fd_growth,
                 "fd growth after warm-up (and idle vs start) allowed")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_flag("!--no-growth-check", f.growth_check,
               "report memory/threads/fds but do not fail on their growth");
  app.add_option("--json", f.json, "also write the results here as JSON");
  app.add_option("--server-bin", f.server_bin,
                 "ferry-server binary (default: next to this program)");
  app.add_option(
      "--log-dir", f.log_dir,
      "coordinator and shard logs (default: a new /tmp/ferry-ps-load-*)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help is 0; any bad usage is 2
  }
  signal(SIGPIPE, SIG_IGN);
  return ferry::Run(f);
}

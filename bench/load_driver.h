// Header-only part of ferry-ps-load (bench/ps_load.cc): the load itself.
// Simulated workers, one thread and one ParameterClient each, loop
// push-then-pull while the main thread samples the cluster's processes
// (bench/proc_probe.h) and watches for stalls.
//
// Thread safety: DriveLoad runs on the main thread (it polls the cluster's
// ChildProcesses); RunWorker threads share only LoadControl (atomics) and
// write their own WorkerStats.
#ifndef FERRY_BENCH_LOAD_DRIVER_H_
#define FERRY_BENCH_LOAD_DRIVER_H_

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/load_cluster.h"
#include "bench/proc_probe.h"
#include "ps/ps_client.h"

namespace ferry {

// When DriveLoad samples, stops and gives up.
struct LoadSchedule {
  double seconds = 30;        // load duration, warm-up included
  double warmup = 10;         // before the measured window
  double rpc_timeout_s = 20;  // the clients' deadline (bounds the stop)
  double stall_s = 10;        // no operation completing this long is a stall
  double sample_interval_s = 1;
  double idle_s = 3;  // after the clients are gone, before "idle"
};

// What one simulated worker did.
struct WorkerStats {
  std::vector<float> push_ms, pull_ms;  // completed in the measured window
  int64_t pushes_ok = 0, pulls_ok = 0;  // whole run
  std::map<int, int64_t> errors;        // absl::StatusCode -> count
  std::map<int, std::string> first_error;
};

// Shared between the workers and the main thread.
struct LoadControl {
  std::atomic<bool> stop{false};
  std::atomic<bool> measuring{false};
  std::atomic<int64_t> completed{0};  // operations, any outcome
  std::atomic<int> finished{0};       // worker threads done
};

// One simulated worker until control.stop: pull, then push (the whole
// gradient, alternating sign, step + 1, base_version = the version last
// pulled) and pull (min_version = that version) again and again. Latencies
// of successes go to `stats` while control.measuring; each error is
// counted by code and followed by a 50 ms pause.
inline void RunWorker(ParameterClient& client, LoadControl& control,
                      WorkerStats& stats) {
  const int64_t n = client.num_elements();
  std::vector<float> params(static_cast<size_t>(n));
  std::vector<float> plus(static_cast<size_t>(n)), minus(plus.size());
  for (int64_t i = 0; i < n; ++i) {
    plus[i] = 1e-3f * static_cast<float>(i % 7 - 3);
    minus[i] = -plus[i];
  }
  int64_t version = 0, step = 0;
  auto count = [&](const absl::Status& s, std::vector<float>& latencies,
                   int64_t& ok, absl::Time begun) {
    const float ms =
        static_cast<float>(absl::ToDoubleMilliseconds(absl::Now() - begun));
    control.completed.fetch_add(1, std::memory_order_relaxed);
    if (s.ok()) {
      ++ok;
      if (control.measuring.load(std::memory_order_relaxed)) {
        latencies.push_back(ms);
      }
      return;
    }
    const int code = static_cast<int>(s.code());
    if (stats.errors[code]++ == 0) stats.first_error[code] = s.ToString();
    absl::SleepFor(absl::Milliseconds(50));  // no hot loop on a dead shard
  };
  auto pull = [&] {
    const absl::Time t0 = absl::Now();
    auto v = client.Pull(version, params.data());
    if (v.ok()) version = *v;
    count(v.status(), stats.pull_ms, stats.pulls_ok, t0);
  };
  pull();
  while (!control.stop.load(std::memory_order_relaxed)) {
    PushInfo info;
    info.step = ++step;
    info.num_samples = 1;
    info.base_version = version;
    const absl::Time t0 = absl::Now();
    absl::Status status;
    auto session = client.BeginPush(info);
    if (!session.ok()) {
      status = session.status();
    } else {
      status = (*session)->Ready(0, n, step % 2 ? plus.data() : minus.data());
      if (status.ok()) status = (*session)->Finish();
    }
    count(status, stats.push_ms, stats.pushes_ok, t0);
    pull();
  }
  control.finished.fetch_add(1);
}

// The processes' samples over the run and the named points.
struct ProcSeries {
  std::vector<ProcSample> samples;
  std::map<std::string, ProcSample> points;  // start, warm, mid, end, idle
  bool gone = false;
};

// What DriveLoad measured.
struct LoadRun {
  std::vector<WorkerStats> stats;  // by worker
  std::vector<ProcSeries> series;  // by cluster process
  double window_s = 0;             // the measured window
  TransferBytes window_bytes;      // payload in the window, all workers
  double self_cpu_s = 0;           // this process's CPU in the window
  bool stalled = false;
  double stalled_for_s = 0;
  std::vector<std::string> failures;
};

// Runs one RunWorker thread per client for f.seconds, samples the
// cluster's processes (points start, warm, mid, end, then idle once the
// clients are destroyed) and watches for stalls (ends early on a stall or
// a process gone). Consumes `clients`. Does not return (stops the cluster
// and exits 1) when a worker is still inside a call long after every
// deadline.
inline LoadRun DriveLoad(
    const LoadSchedule& f, LoadCluster& cluster,
    std::vector<std::unique_ptr<GrpcParameterClient>> clients) {
  LoadRun run;
  run.series.resize(cluster.procs.size());
  run.stats.resize(clients.size());
  const absl::Time t0 = absl::Now();
  auto sample_all = [&](const char* point) {
    for (size_t i = 0; i < cluster.procs.size(); ++i) {
      ProcSeries& series = run.series[i];
      if (series.gone) continue;
      auto s = ReadProcSample(cluster.procs[i].pid());
      if (auto code = cluster.procs[i].Poll(); code || !s.has_value()) {
        series.gone = true;
        run.failures.push_back(absl::StrCat(cluster.names[i], " exited (code ",
                                            code ? *code : -1, "); see ",
                                            cluster.procs[i].log_path()));
        continue;
      }
      s->t_s = absl::ToDoubleSeconds(absl::Now() - t0);
      series.samples.push_back(*s);
      if (point != nullptr) series.points[point] = *s;
    }
  };
  auto client_bytes = [&] {
    TransferBytes sum;
    for (const auto& c : clients) {
      const TransferBytes b = c->bytes();
      sum.sent += b.sent;
      sum.received += b.received;
    }
    return sum;
  };
  sample_all("start");

  LoadControl control;
  std::vector<std::thread> threads;
  for (size_t w = 0; w < clients.size(); ++w) {
    threads.emplace_back(RunWorker, std::ref(*clients[w]), std::ref(control),
                         std::ref(run.stats[w]));
  }
  const absl::Time start = absl::Now();
  const absl::Time warm_at = start + absl::Seconds(f.warmup);
  const absl::Time end_at = start + absl::Seconds(f.seconds);
  absl::Time window_begin = start;
  TransferBytes bytes_warm;
  double cpu_warm = SelfCpuSeconds();
  bool warm_taken = false, mid_taken = false;
  int64_t last_completed = -1;
  absl::Time last_progress = start;
  while (true) {
    const absl::Time next = warm_taken ? end_at : warm_at;
    absl::SleepFor(std::clamp(next - absl::Now(), absl::ZeroDuration(),
                              absl::Seconds(f.sample_interval_s)));
    const absl::Time now = absl::Now();
    if (!warm_taken && now >= warm_at) {
      control.measuring = true;
      window_begin = now;
      bytes_warm = client_bytes();
      cpu_warm = SelfCpuSeconds();
      sample_all("warm");
      warm_taken = true;
      continue;
    }
    const int64_t completed = control.completed.load();
    if (completed != last_completed) {
      last_completed = completed;
      last_progress = now;
    } else if (now - last_progress >= absl::Seconds(f.stall_s)) {
      run.stalled = true;
      run.stalled_for_s = absl::ToDoubleSeconds(now - last_progress);
    }
    if (warm_taken && !mid_taken &&
        now >= window_begin + (end_at - window_begin) / 2) {
      sample_all("mid");
      mid_taken = true;
      continue;
    }
    if (now >= end_at || run.stalled || !run.failures.empty()) {
      control.measuring = false;
      run.window_s = absl::ToDoubleSeconds(now - window_begin);
      const TransferBytes bytes_end = client_bytes();
      run.window_bytes.sent = bytes_end.sent - bytes_warm.sent;
      run.window_bytes.received = bytes_end.received - bytes_warm.received;
      run.self_cpu_s = SelfCpuSeconds() - cpu_warm;
      sample_all("end");
      break;
    }
    sample_all(nullptr);
  }
  for (ProcSeries& s : run.series) {  // ended early: earlier points stand in
    if (s.samples.empty()) continue;
    if (!warm_taken) s.points["warm"] = s.samples.front();
    if (!mid_taken) s.points["mid"] = s.points["warm"];
  }
  control.stop = true;
  // Every call has a deadline, so every worker returns within about one
  // push + pull timeout; if not, something below us is stuck for good.
  const double grace_s = 2 * f.rpc_timeout_s + 10;
  const absl::Time join_by = absl::Now() + absl::Seconds(grace_s);
  const int workers = static_cast<int>(clients.size());
  while (control.finished.load() < workers && absl::Now() < join_by) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  if (control.finished.load() < workers) {
    std::fprintf(stderr,
                 "ferry-ps-load: FAIL: %d of %d workers still inside a call "
                 "%.0f s after the end (a call ignored its deadline)\n",
                 workers - control.finished.load(), workers, grace_s);
    for (ChildProcess& p : cluster.procs) p.Stop(absl::Seconds(2));
    std::_Exit(1);
  }
  for (std::thread& t : threads) t.join();
  clients.clear();  // closes every channel
  absl::SleepFor(absl::Seconds(f.idle_s));
  sample_all("idle");
  return run;
}

}  // namespace ferry

#endif  // FERRY_BENCH_LOAD_DRIVER_H_

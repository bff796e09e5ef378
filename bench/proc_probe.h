// Header-only helpers of the benchmarks (bench/ps_load.cc,
// bench/ps_goodput.cc, bench/sparse_scale.cc): what /proc says about a
// process (resident memory and its peak,
// threads, open file descriptors, CPU time), this process's CPU time, and
// latency percentiles of a sample set.
//
// Linux only. Thread safety: stateless functions.
#ifndef FERRY_BENCH_PROC_PROBE_H_
#define FERRY_BENCH_PROC_PROBE_H_

#include <dirent.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace ferry {

// CPU seconds (user + system) used so far by this process.
inline double SelfCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         1e-6 * (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

// CPU seconds (user + system) used so far by process `pid` (utime + stime
// of /proc/PID/stat); 0 if unknown.
inline double ProcessCpuSeconds(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  std::FILE* file = std::fopen(path.c_str(), "r");
  if (file == nullptr) return 0;
  char buffer[1024];
  const size_t n = std::fread(buffer, 1, sizeof(buffer) - 1, file);
  std::fclose(file);
  buffer[n] = '\0';
  // Fields after the command (which may hold spaces) start after ')'.
  const char* p = std::strrchr(buffer, ')');
  if (p == nullptr) return 0;
  unsigned long utime = 0, stime = 0;
  // state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
  // utime stime
  if (std::sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
                  &utime, &stime) != 2) {
    return 0;
  }
  return static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
}

// One look at a process.
struct ProcSample {
  double t_s = 0;        // seconds since the caller's reference time
  int64_t rss_kib = 0;   // VmRSS
  int64_t hwm_kib = 0;   // VmHWM: the peak VmRSS since the process started
  int64_t anon_kib = 0;  // RssAnon (heap, stacks: where a leak shows)
  int64_t threads = 0;   // Threads
  int64_t fds = 0;       // entries of /proc/PID/fd
  double cpu_s = 0;      // utime + stime
};

// Reads /proc/PID/{status,fd,stat}; nullopt when the process is gone or
// /proc cannot be read.
inline std::optional<ProcSample> ReadProcSample(pid_t pid) {
  ProcSample s;
  const std::string base = "/proc/" + std::to_string(pid);
  std::FILE* status = std::fopen((base + "/status").c_str(), "r");
  if (status == nullptr) return std::nullopt;
  char line[256];
  bool have_rss = false;
  while (std::fgets(line, sizeof(line), status) != nullptr) {
    long long v = 0;
    if (std::sscanf(line, "VmRSS: %lld", &v) == 1) {
      s.rss_kib = v;
      have_rss = true;
    } else if (std::sscanf(line, "VmHWM: %lld", &v) == 1) {
      s.hwm_kib = v;
    } else if (std::sscanf(line, "RssAnon: %lld", &v) == 1) {
      s.anon_kib = v;
    } else if (std::sscanf(line, "Threads: %lld", &v) == 1) {
      s.threads = v;
    }
  }
  std::fclose(status);
  if (!have_rss) return std::nullopt;  // a zombie has no VmRSS
  DIR* dir = opendir((base + "/fd").c_str());
  if (dir == nullptr) return std::nullopt;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++s.fds;
  }
  closedir(dir);
  s.cpu_s = ProcessCpuSeconds(pid);
  return s;
}

// Percentiles of a latency sample set, in the samples' unit.
struct LatencySummary {
  int64_t count = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
};

// Nearest-rank percentiles (p-th: the smallest sample with at least p% of
// the samples at or below it). Sorts `v`. All zero for an empty set.
inline LatencySummary Summarize(std::vector<float>& v) {
  LatencySummary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.count = static_cast<int64_t>(v.size());
  double sum = 0;
  for (float x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  auto rank = [&](double p) {
    const size_t k = static_cast<size_t>(
        std::ceil(p / 100.0 * static_cast<double>(v.size())));
    return static_cast<double>(v[std::clamp<size_t>(k, 1, v.size()) - 1]);
  };
  s.p50 = rank(50);
  s.p90 = rank(90);
  s.p99 = rank(99);
  s.max = v.back();
  return s;
}

}  // namespace ferry

#endif  // FERRY_BENCH_PROC_PROBE_H_

// Header-only part of ferry-sparse-scale (bench/sparse_scale.cc): after the
// shards stopped (each wrote its final checkpoint), every shard process is
// started again with the same command line, so that it resumes from its
// newest checkpoint as a restarted pod does; once it answers ShardInfo its
// rows and its peak RSS (VmHWM: the resume's peak) are read, and it is
// killed (SIGKILL: no new checkpoint is written).
//
// Thread safety: call on the main thread (the children's death signal
// follows the thread that spawned them).
#ifndef FERRY_BENCH_SPARSE_SCALE_RESUME_H_
#define FERRY_BENCH_SPARSE_SCALE_RESUME_H_

#include <signal.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/load_cluster.h"
#include "bench/proc_probe.h"

namespace ferry {

struct ShardResume {
  int64_t rows = -1;      // ShardInfo's, once resumed
  int64_t version = -1;   // ShardInfo's
  int64_t peak_kib = -1;  // VmHWM once it answered
  double seconds = -1;    // from the start to its first ShardInfo answer
  std::string error;      // empty when it resumed
};

// Restarts every shard of `c` (they must have exited) and measures each
// one's resume; waits at most `timeout` for all of them.
inline std::vector<ShardResume> ResumeShards(const LoadClusterOptions& o,
                                             LoadCluster& c,
                                             absl::Duration timeout) {
  std::vector<ShardResume> out(o.shards);
  std::vector<std::optional<ChildProcess>> procs(o.shards);
  const absl::Time begin = absl::Now();
  for (int i = 0; i < o.shards; ++i) {
    auto child =
        ChildProcess::Spawn(LoadShardArgv(o, c, i),
                            absl::StrCat(o.log_dir, "/ps", i, "-resume.log"));
    if (!child.ok()) {
      out[i].error = child.status().ToString();
      continue;
    }
    procs[i].emplace(*std::move(child));
  }
  for (bool pending = true; pending && absl::Now() - begin < timeout;) {
    pending = false;
    for (int i = 0; i < o.shards; ++i) {
      if (!procs[i].has_value() || out[i].seconds >= 0 ||
          !out[i].error.empty()) {
        continue;
      }
      if (std::optional<int> code = procs[i]->Poll()) {
        out[i].error = absl::StrCat("exited with code ", *code, " (see ",
                                    procs[i]->log_path(), ")");
        continue;
      }
      absl::StatusOr<v1::ShardInfoResponse> info =
          QueryShardInfo(c, i, absl::Seconds(1));
      if (!info.ok()) {
        pending = true;
        continue;
      }
      out[i].seconds = absl::ToDoubleSeconds(absl::Now() - begin);
      out[i].rows = info->sparse().rows();
      out[i].version = info->version();
      if (std::optional<ProcSample> s = ReadProcSample(procs[i]->pid())) {
        out[i].peak_kib = s->hwm_kib;
      }
    }
    if (pending) absl::SleepFor(absl::Milliseconds(200));
  }
  for (int i = 0; i < o.shards; ++i) {
    if (!procs[i].has_value()) continue;
    if (out[i].seconds < 0 && out[i].error.empty()) {
      out[i].error =
          absl::StrCat("not resumed after ", absl::FormatDuration(timeout));
    }
    procs[i]->Signal(SIGKILL);
    procs[i]->Stop(absl::Seconds(5));
  }
  return out;
}

}  // namespace ferry

#endif  // FERRY_BENCH_SPARSE_SCALE_RESUME_H_

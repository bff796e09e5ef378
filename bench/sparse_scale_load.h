// Header-only part of ferry-sparse-scale (bench/sparse_scale.cc): the
// pushers that fill the shards' tables with new ids, the sampler of the
// processes' memory, and the checkpoint of every shard at once.
//
// Thread safety: Push runs on its own threads, sharing only PushState
// (atomics, and a mutex for the rest); Sampler and CheckpointAll run on the
// main thread (CheckpointAll starts and joins one thread per shard).
#ifndef FERRY_BENCH_SPARSE_SCALE_LOAD_H_
#define FERRY_BENCH_SPARSE_SCALE_LOAD_H_

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/load_cluster.h"
#include "bench/proc_probe.h"
#include "common/sharding.h"
#include "ferry/v1/ps.grpc.pb.h"
#include "proto/rpc_util.h"
#include "ps/ps_client.h"

namespace ferry {

// splitmix64's finalizer: distinct counters give distinct, scattered ids.
inline uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Slots of an absl::flat_hash_set after `n` insertions without erasures:
// capacities are 2^k - 1, grown once more than capacity - capacity / 8
// elements would be held (Abseil 20220623 raw_hash_set.h,
// CapacityToGrowth; Group::kWidth 16).
inline int64_t IndexSlots(int64_t n) {
  if (n <= 0) return 0;
  int64_t capacity = 1;
  while (capacity - capacity / 8 < n) capacity = capacity * 2 + 1;
  return capacity;
}

// Shared by the pushers and the main thread.
struct PushState {
  std::atomic<int64_t> next_push{0};
  std::atomic<int64_t> rows_pushed{0};  // rows of pushes that succeeded
  std::atomic<int64_t> pushes{0};
  std::atomic<bool> failed{false};
  std::atomic<int> finished{0};
  std::mutex mu;
  std::string first_error;             // guarded by mu
  std::vector<int64_t> rows_per_cell;  // [shard * tables + table], by mu
  // Each push's [begin, end), seconds since t0 (guarded by mu).
  std::vector<std::pair<double, double>> push_times;
  absl::Time t0;
};

struct Plan {
  int64_t rows = 0;
  int64_t ids_per_push = 0;
  int tables = 0;
  int dim = 0;
  int shards = 0;
};

// One pusher until every row is pushed or a push failed.
inline void Push(ParameterClient& client, const Plan& plan, PushState& state) {
  const int64_t n = client.num_elements();
  const std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
  std::vector<int64_t> cells(static_cast<size_t>(plan.shards) * plan.tables);
  std::vector<SparseRows> parts(plan.tables);
  while (!state.failed.load()) {
    const int64_t k = state.next_push.fetch_add(1);
    const int64_t first = k * plan.ids_per_push;
    if (first >= plan.rows) break;
    const int64_t count = std::min(plan.ids_per_push, plan.rows - first);
    for (int t = 0; t < plan.tables; ++t) {
      parts[t].table = t;
      parts[t].ids.clear();
    }
    for (int64_t r = first; r < first + count; ++r) {
      const int t = static_cast<int>(r % plan.tables);
      const uint64_t id = Mix(static_cast<uint64_t>(r));
      parts[t].ids.push_back(id);
      ++cells[ShardOfRow(t, id, plan.shards) * plan.tables + t];
    }
    for (SparseRows& part : parts) {
      part.grads.resize(part.ids.size() * plan.dim);
      for (size_t i = 0; i < part.grads.size(); ++i) {
        part.grads[i] = 0.01f * static_cast<float>(i % 5) - 0.02f;
      }
    }
    const absl::Time begun = absl::Now();
    PushInfo info;
    info.step = k;
    info.num_samples = 1;
    info.with_rows = true;
    absl::Status status;
    auto session = client.BeginPush(info);
    if (!session.ok()) {
      status = session.status();
    } else {
      status = (*session)->AddRows(parts);
      if (status.ok()) status = (*session)->Ready(0, n, zeros.data());
      if (status.ok()) status = (*session)->Finish();
    }
    if (!status.ok()) {
      std::lock_guard<std::mutex> lock(state.mu);
      if (state.first_error.empty()) {
        state.first_error = absl::StrCat("push ", k, ": ", status.ToString());
      }
      state.failed = true;
      break;
    }
    {
      std::lock_guard<std::mutex> lock(state.mu);
      state.push_times.emplace_back(
          absl::ToDoubleSeconds(begun - state.t0),
          absl::ToDoubleSeconds(absl::Now() - state.t0));
    }
    state.rows_pushed.fetch_add(count);
    state.pushes.fetch_add(1);
  }
  {
    std::lock_guard<std::mutex> lock(state.mu);
    for (size_t i = 0; i < cells.size(); ++i) {
      state.rows_per_cell[i] += cells[i];
    }
  }
  state.finished.fetch_add(1);
}

// What the main thread tracks of each process.
struct ProcTrack {
  int64_t start_rss_kib = 0;
  int64_t max_rss_kib = 0;  // sampled
  int64_t hwm_kib = 0;      // latest VmHWM read
  std::map<std::string, ProcSample> points;
  std::vector<ProcSample> samples;
};

class Sampler {
 public:
  Sampler(const LoadCluster& cluster, absl::Time t0)
      : cluster_(cluster), t0_(t0), tracks_(cluster.procs.size()) {}

  // Samples every process; `point` (optional) names the sample.
  void Sample(const std::string& point = "") {
    for (size_t i = 0; i < cluster_.procs.size(); ++i) {
      std::optional<ProcSample> s = ReadProcSample(cluster_.procs[i].pid());
      if (!s.has_value()) continue;
      s->t_s = absl::ToDoubleSeconds(absl::Now() - t0_);
      ProcTrack& t = tracks_[i];
      if (t.samples.empty()) t.start_rss_kib = s->rss_kib;
      t.max_rss_kib = std::max(t.max_rss_kib, s->rss_kib);
      t.hwm_kib = std::max(t.hwm_kib, s->hwm_kib);
      t.samples.push_back(*s);
      if (!point.empty()) t.points[point] = *s;
    }
  }
  const ProcTrack& track(size_t i) const { return tracks_[i]; }

 private:
  const LoadCluster& cluster_;
  const absl::Time t0_;
  std::vector<ProcTrack> tracks_;
};

struct CheckpointRound {
  double at_fraction = 0;
  double begin_s = 0, end_s = 0;  // since t0
  int64_t rows_pushed = 0;        // when it started
  std::vector<double> seconds;
  std::vector<int64_t> file_bytes;
  std::vector<int64_t> version;
  std::vector<std::string> errors;
};

// Checkpoints every shard at once (one thread each) while the main thread
// samples.
inline CheckpointRound CheckpointAll(const LoadCluster& cluster,
                                     const std::string& job_id,
                                     double timeout_s, Sampler& sampler,
                                     double interval_s) {
  const size_t n = cluster.shard_addresses.size();
  CheckpointRound round;
  round.seconds.assign(n, 0);
  round.file_bytes.assign(n, 0);
  round.version.assign(n, -1);
  round.errors.assign(n, "");
  std::atomic<size_t> done{0};
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      auto stub =
          v1::ParameterServer::NewStub(MakeChannel(cluster.shard_addresses[i]));
      grpc::ClientContext context;
      SetDeadline(context, absl::Seconds(timeout_s));
      v1::CheckpointRequest request;
      request.set_job_id(job_id);
      request.set_version(-1);
      v1::CheckpointResponse response;
      const absl::Time begin = absl::Now();
      const absl::Status s =
          FromGrpcStatus(stub->Checkpoint(&context, request, &response));
      round.seconds[i] = absl::ToDoubleSeconds(absl::Now() - begin);
      if (s.ok()) {
        round.version[i] = response.version();
        struct stat st;
        if (::stat(response.path().c_str(), &st) == 0) {
          round.file_bytes[i] = st.st_size;
        }
      } else {
        round.errors[i] = s.ToString();
      }
      done.fetch_add(1);
    });
  }
  while (done.load() < n) {
    sampler.Sample();
    absl::SleepFor(absl::Seconds(interval_s));
  }
  for (std::thread& t : threads) t.join();
  return round;
}

}  // namespace ferry

#endif  // FERRY_BENCH_SPARSE_SCALE_LOAD_H_

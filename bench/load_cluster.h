// Header-only part of ferry-ps-load (bench/ps_load.cc) and
// ferry-sparse-scale (bench/sparse_scale.cc): a PS job's coordinator and
// shards as real `ferry-server` processes on 127.0.0.1,
// started with the launcher of `ferry local` (client/child_process.h: own
// process group, output appended to a log, killed when this process dies).
//
// Thread safety: not thread-safe; create, use and destroy it on the main
// thread (the children's death signal follows the thread that spawned them).
#ifndef FERRY_BENCH_LOAD_CLUSTER_H_
#define FERRY_BENCH_LOAD_CLUSTER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/child_process.h"
#include "ferry/v1/coordinator.grpc.pb.h"
#include "ferry/v1/ps.grpc.pb.h"
#include "proto/rpc_util.h"

namespace ferry {

struct LoadClusterOptions {
  std::string server_bin;  // the ferry-server binary
  std::string log_dir;     // <name>.log for every process; must exist
  std::string model = "784-256-128-10";
  std::string job_id = "ferry-ps-load";
  std::string dataset = "synthetic:1024";
  // More coordinator flags (e.g. a DLRM job's --embedding-*).
  std::vector<std::string> coordinator_args;
  // More flags for shard i (e.g. its --checkpoint-dir); may be empty.
  std::function<std::vector<std::string>(int shard)> shard_args;
  int shards = 1;
  int64_t max_chunk_elements = 0;  // 0: the coordinator's default
  absl::Duration start_timeout = absl::Seconds(60);
};

// A coordinator and its shards; SIGTERM (then SIGKILL after 5 s) to each
// when destroyed.
struct LoadCluster {
  std::vector<std::string> names;   // "coordinator", "ps0", ...
  std::vector<ChildProcess> procs;  // in the order of `names`
  std::string coordinator;          // HOST:PORT
  std::vector<std::string> shard_addresses;
  v1::JobSpec job;  // as the coordinator serves it

  LoadCluster() = default;
  LoadCluster(const LoadCluster&) = delete;
  LoadCluster& operator=(const LoadCluster&) = delete;
  ~LoadCluster() {
    for (ChildProcess& p : procs) p.Stop(absl::Seconds(5));
  }
};

// Shard `i`'s ShardInfo, within `timeout`; its error says which shard.
inline absl::StatusOr<v1::ShardInfoResponse> QueryShardInfo(
    const LoadCluster& cluster, size_t i, absl::Duration timeout) {
  auto stub =
      v1::ParameterServer::NewStub(MakeChannel(cluster.shard_addresses[i]));
  grpc::ClientContext context;
  SetDeadline(context, timeout);
  v1::ShardInfoResponse info;
  const absl::Status s =
      FromGrpcStatus(stub->ShardInfo(&context, v1::ShardInfoRequest(), &info));
  if (!s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat("ShardInfo of ps", i, ": ", s.message()));
  }
  return info;
}

// Shard `i`'s command line (what StartLoadCluster runs; a restart from its
// checkpoints runs it again).
inline std::vector<std::string> LoadShardArgv(const LoadClusterOptions& o,
                                              const LoadCluster& c, int i) {
  std::vector<std::string> shard = {
      o.server_bin,    "ps",          "--listen",   c.shard_addresses[i],
      "--coordinator", c.coordinator, "--shard-id", std::to_string(i)};
  if (o.shard_args) {
    const std::vector<std::string> more = o.shard_args(i);
    shard.insert(shard.end(), more.begin(), more.end());
  }
  return shard;
}

// Starts the coordinator (an async PS job `o.job_id` of `o.model` on
// `o.dataset`, by default a small synthetic one; it never sees a worker)
// and `o.shards` shards on
// free ports, and returns once the coordinator answers GetJob and every shard
// ShardInfo. UNAVAILABLE when a process cannot be started or exits,
// DEADLINE_EXCEEDED when one is not ready within `o.start_timeout` (both
// name its log). Processes already started stay in `c` (stopped with it).
inline absl::Status StartLoadCluster(const LoadClusterOptions& o,
                                     LoadCluster& c) {
  auto port = PickFreePort();
  if (!port.ok()) return port.status();
  c.coordinator = absl::StrCat("127.0.0.1:", *port);
  for (int i = 0; i < o.shards; ++i) {
    port = PickFreePort();
    if (!port.ok()) return port.status();
    c.shard_addresses.push_back(absl::StrCat("127.0.0.1:", *port));
  }
  std::vector<std::string> coord = {
      o.server_bin,    "coordinator",
      "--listen",      c.coordinator,
      "--job-id",      o.job_id,
      "--model",       o.model,
      "--dataset",     o.dataset,
      "--mode",        "ps",
      "--consistency", "async",
      "--shards",      absl::StrJoin(c.shard_addresses, ",")};
  if (o.max_chunk_elements > 0) {
    coord.insert(coord.end(), {"--max-chunk-elements",
                               std::to_string(o.max_chunk_elements)});
  }
  coord.insert(coord.end(), o.coordinator_args.begin(),
               o.coordinator_args.end());
  auto child = ChildProcess::Spawn(coord, o.log_dir + "/coordinator.log");
  if (!child.ok()) return child.status();
  c.names.push_back("coordinator");
  c.procs.push_back(*std::move(child));
  for (int i = 0; i < o.shards; ++i) {
    child = ChildProcess::Spawn(LoadShardArgv(o, c, i),
                                absl::StrCat(o.log_dir, "/ps", i, ".log"));
    if (!child.ok()) return child.status();
    c.names.push_back(absl::StrCat("ps", i));
    c.procs.push_back(*std::move(child));
  }
  auto coord_stub = v1::Coordinator::NewStub(MakeChannel(c.coordinator));
  std::vector<std::unique_ptr<v1::ParameterServer::Stub>> shard_stubs;
  for (const std::string& a : c.shard_addresses) {
    shard_stubs.push_back(v1::ParameterServer::NewStub(MakeChannel(a)));
  }
  const absl::Time give_up = absl::Now() + o.start_timeout;
  size_t ready = 0;  // processes known ready, in the order of `procs`
  while (ready < c.procs.size()) {
    for (size_t i = 0; i < c.procs.size(); ++i) {
      if (auto code = c.procs[i].Poll()) {
        return absl::UnavailableError(
            absl::StrCat(c.names[i], " exited with code ", *code, " (see ",
                         c.procs[i].log_path(), ")"));
      }
    }
    if (absl::Now() > give_up) {
      return absl::DeadlineExceededError(
          absl::StrCat(c.names[ready], " not ready after ",
                       absl::FormatDuration(o.start_timeout), " (see ",
                       c.procs[ready].log_path(), ")"));
    }
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(1));
    bool ok = false;
    if (ready == 0) {
      ok = coord_stub->GetJob(&context, v1::GetJobRequest(), &c.job).ok();
    } else {
      v1::ShardInfoResponse info;
      ok = shard_stubs[ready - 1]
               ->ShardInfo(&context, v1::ShardInfoRequest(), &info)
               .ok();
    }
    if (ok) {
      ++ready;
    } else {
      absl::SleepFor(absl::Milliseconds(100));
    }
  }
  return absl::OkStatus();
}

}  // namespace ferry

#endif  // FERRY_BENCH_LOAD_CLUSTER_H_

// ferry-ps-goodput: goodput of one worker's push + pull of a whole model
// through real PS shards over gRPC on loopback (bench/ps_goodput.sh puts it
// next to iperf3 in the same run).
//
// `--shards` PsShard cores, each served by its own gRPC server
// (StartPsServer, the same code as `ferry-server ps`) on 127.0.0.1 in
// a child process of its own (this program run with --serve-shard; with
// --in-process, threads of this process instead), and one
// GrpcParameterClient in this process. Every iteration is one worker step
// without compute: BeginPush + Ready(whole gradient) + Finish, then (sync
// only) FinalizeStep on every shard as the coordinator would, then
// Pull(min_version = the new version) of the whole model.
//
// Consistency: `async` (default) applies a push on arrival, so one iteration
// is exactly push + pull with no coordinator in the loop; `sync` adds the
// FinalizeStep round trip and the shard's sum/average pass; `sync-on-push`
// is a sync worker's path: the push names its contributor
// set (the shard applies the step on it, no FinalizeStep) and the pull of
// the new version is started before the push, so each shard's weights come
// back while the others are still pushed to. Either way the
// timed path includes the shard core's own work (staging, finiteness check,
// SGD update, snapshot copy): it is what a worker waits for. `core_*` reports
// that work alone (the same PsShard calls without gRPC) so the transport's
// share can be read off.
//
// goodput = payload bytes (model bytes pushed + model bytes pulled, without
// protobuf framing) / wall time of the timed iterations; MB = 1e6 bytes.
// CPU seconds of the client and the shard processes over the timed
// iterations are reported too (cpu_ms_per_MB): on a shared machine they are
// steadier than wall time. Both roles run with the glibc allocator settings
// of ferry-worker / ferry-server (TuneAllocatorForLargeMessages);
// FERRY_NO_MALLOC_TUNING=1 runs without them.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/proc_probe.h"
#include "common/allocator_tuning.h"
#include "common/shard_partitions.h"
#include "common/sharding.h"
#include "ferry/v1/ps.grpc.pb.h"
#include "proto/rpc_util.h"
#include "ps/ps_client.h"
#include "ps/ps_server.h"
#include "ps/ps_shard.h"

namespace ferry {
namespace {

struct Flags {
  double mib = 64;
  int iters = 10;
  int warmup = 2;
  int shards = 1;      // shard processes (or in-process server groups)
  int partitions = 1;  // logical shards per shard process
  int chunk_kib = 1024;
  int64_t receive_window = PsLimits{}.receive_window_bytes;
  std::string consistency = "async";
  bool core_baseline = true;
  bool in_process = false;
  int serve_shard = -1;  // child mode: serve this shard, print the port
};

struct Phases {
  std::vector<double> push_s, finalize_s, pull_s, iter_s;
};

double Sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}
double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2]
                      : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}
double Min(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::min_element(v.begin(), v.end());
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "ferry-ps-goodput: %s\n", status.ToString().c_str());
  return 1;
}

PsShardConfig ShardConfig(const Flags& f, int64_t n, int shard_id,
                          int num_shards) {
  PsShardConfig config;
  config.job_id = "goodput";
  config.shard_id = shard_id;
  config.num_shards = num_shards;
  config.tensor_sizes = {n};
  config.max_chunk_elements = static_cast<int64_t>(f.chunk_kib) * 256;
  config.limits.receive_window_bytes = f.receive_window;
  config.optimizer.lr = 1e-3;  // plain SGD: the cheapest update
  config.consistency =
      f.consistency == "async" ? PsConsistency::kAsync : PsConsistency::kSync;
  const FlatRange range = ShardRange(n, num_shards, shard_id);
  config.initial_slice.assign(static_cast<size_t>(range.size()), 0.5f);
  return config;
}

// The shard core's work for one push + pull, without gRPC: staging, every
// chunk added (copy + finiteness check), commit (average + SGD), snapshot,
// copy into the worker's buffer. One shard holding the whole model.
absl::StatusOr<std::vector<double>> CoreBaseline(
    const Flags& f, int64_t n, const std::vector<float>& grads,
    std::vector<float>& params) {
  Flags async = f;
  async.consistency = "async";
  auto shard = PsShard::Create(ShardConfig(async, n, 0, 1));
  if (!shard.ok()) return shard.status();
  std::vector<double> times;
  for (int i = 0; i < f.warmup + f.iters; ++i) {
    const absl::Time t0 = absl::Now();
    PsPushHeader h;
    h.job_id = "goodput";
    h.worker_id = "w0";
    h.step = i;
    h.num_samples = 1;
    h.base_version = i;
    auto staging = (*shard)->BeginPush(h);
    if (!staging.ok()) return staging.status();
    for (const Chunk& c : (*shard)->owned_chunks()) {
      absl::Status s =
          (*shard)->AddChunk(**staging, c.id, grads.data() + c.flat_offset,
                             static_cast<size_t>(c.length) * sizeof(float));
      if (!s.ok()) return s;
    }
    auto version = (*shard)->CommitPush(*std::move(staging));
    if (!version.ok()) return version.status();
    std::shared_ptr<const PsSnapshot> snapshot = (*shard)->CurrentSnapshot();
    std::memcpy(params.data(), snapshot->values.data(),
                static_cast<size_t>(n) * sizeof(float));
    if (i >= f.warmup) times.push_back(absl::ToDoubleSeconds(absl::Now() - t0));
  }
  return times;
}

absl::Status Finalize(
    const std::vector<std::unique_ptr<v1::ParameterServer::Stub>>& stubs,
    int64_t step) {
  for (size_t s = 0; s < stubs.size(); ++s) {
    v1::FinalizeStepRequest request;
    request.set_job_id("goodput");
    request.set_step(step);
    v1::Contributor* c = request.add_contributors();
    c->set_worker_id("w0");
    c->set_num_samples(1);
    v1::FinalizeStepResponse response;
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(30));
    absl::Status status =
        FromGrpcStatus(stubs[s]->FinalizeStep(&context, request, &response));
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

int64_t NumElements(const Flags& f) {
  return static_cast<int64_t>(f.mib * (1 << 20)) / 4;
}

int LogicalShards(const Flags& f) { return f.shards * f.partitions; }

// Child mode: serves the logical shards of process f.serve_shard (its
// partitions, common/shard_partitions.h), prints their ports on one line,
// and exits when stdin reaches EOF (the parent closed it or died).
int ServeShard(const Flags& f) {
  const int64_t n = NumElements(f);
  std::vector<std::unique_ptr<PsShard>> shards;
  std::vector<PsServer> servers;
  std::string ports;
  for (int id : ShardsOfProcess(f.serve_shard, f.shards, f.partitions)) {
    auto shard = PsShard::Create(ShardConfig(f, n, id, LogicalShards(f)));
    if (!shard.ok()) return Fail(shard.status());
    shards.push_back(*std::move(shard));
    auto server = StartPsServer(shards.back().get(), "127.0.0.1:0");
    if (!server.ok()) return Fail(server.status());
    absl::StrAppend(&ports, ports.empty() ? "" : " ", server->port);
    servers.push_back(*std::move(server));
  }
  std::printf("%s\n", ports.c_str());
  std::fflush(stdout);
  char byte;
  while (read(STDIN_FILENO, &byte, 1) > 0) {
  }
  for (PsServer& server : servers) server.Shutdown(absl::Seconds(1));
  return 0;
}

// A shard server in a child process (this program with --serve-shard).
struct ChildShard {
  pid_t pid = -1;
  int stdin_fd = -1;       // closing it stops the child
  std::vector<int> ports;  // by partition
};

absl::StatusOr<ChildShard> SpawnShard(const Flags& f, int shard_id) {
  // Close-on-exec, so that no other child inherits this child's stdin.
  int to_child[2], from_child[2];
  if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0) {
    return absl::InternalError("pipe failed");
  }
  const std::vector<std::string> args = {"/proc/self/exe",
                                         "--serve-shard",
                                         std::to_string(shard_id),
                                         "--shards",
                                         std::to_string(f.shards),
                                         "--partitions",
                                         std::to_string(f.partitions),
                                         "--mib",
                                         absl::StrCat(f.mib),
                                         "--chunk-kib",
                                         std::to_string(f.chunk_kib),
                                         "--receive-window",
                                         std::to_string(f.receive_window),
                                         "--consistency",
                                         f.consistency};
  std::vector<char*> argv;  // built before fork: the child only execs
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    dup2(to_child[0], STDIN_FILENO);  // dup2 clears close-on-exec
    dup2(from_child[1], STDOUT_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  ChildShard child;
  child.pid = pid;
  child.stdin_fd = to_child[1];
  std::string line;
  char c;
  while (read(from_child[0], &c, 1) == 1 && c != '\n') line.push_back(c);
  close(from_child[0]);
  for (absl::string_view word : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    int port = 0;
    if (absl::SimpleAtoi(word, &port) && port > 0) child.ports.push_back(port);
  }
  if (child.ports.size() != static_cast<size_t>(f.partitions)) {
    close(child.stdin_fd);
    waitpid(pid, nullptr, 0);
    return absl::UnavailableError(
        absl::StrCat("shard ", shard_id, " process did not start"));
  }
  return child;
}

void StopShard(ChildShard& child) {
  if (child.pid < 0) return;
  close(child.stdin_fd);
  waitpid(child.pid, nullptr, 0);
  child.pid = -1;
}

int Run(const Flags& f) {
  const int64_t n = NumElements(f);
  if (n < 1 || f.iters < 1 || f.warmup < 0 || f.shards < 1 ||
      f.partitions < 1 || f.chunk_kib < 1 ||
      (f.consistency != "async" && f.consistency != "sync" &&
       f.consistency != "sync-on-push")) {
    return Fail(absl::InvalidArgumentError("bad flags (see --help)"));
  }
  // Shards and their servers (each its own gRPC server and port).
  std::vector<std::unique_ptr<PsShard>> shards;
  std::vector<PsServer> servers;
  std::vector<ChildShard> children;
  struct StopChildren {
    std::vector<ChildShard>& children;
    ~StopChildren() {
      for (ChildShard& c : children) StopShard(c);
    }
  } stop_children{children};
  // Each process's partition addresses; the client sees the logical
  // shards in the job's order (common/shard_partitions.h).
  std::vector<std::vector<std::string>> process_addresses;
  for (int p = 0; p < f.shards; ++p) {
    std::vector<int> ports;
    if (f.in_process) {
      for (int id : ShardsOfProcess(p, f.shards, f.partitions)) {
        auto shard = PsShard::Create(ShardConfig(f, n, id, LogicalShards(f)));
        if (!shard.ok()) return Fail(shard.status());
        shards.push_back(*std::move(shard));
        auto server = StartPsServer(shards.back().get(), "127.0.0.1:0");
        if (!server.ok()) return Fail(server.status());
        ports.push_back(server->port);
        servers.push_back(*std::move(server));
      }
    } else {
      auto child = SpawnShard(f, p);
      if (!child.ok()) return Fail(child.status());
      ports = child->ports;
      children.push_back(*child);
    }
    process_addresses.emplace_back();
    for (int port : ports) {
      process_addresses.back().push_back(absl::StrCat("127.0.0.1:", port));
    }
  }
  const std::vector<std::string> addresses =
      LogicalShardAddresses(process_addresses);
  std::vector<std::unique_ptr<v1::ParameterServer::Stub>> stubs;
  for (const std::string& address : addresses) {
    stubs.push_back(v1::ParameterServer::NewStub(MakeChannel(address)));
  }
  auto chunks = PlaceChunks({n}, LogicalShards(f),
                            static_cast<int64_t>(f.chunk_kib) * 256);
  if (!chunks.ok()) return Fail(chunks.status());
  GrpcParameterClientOptions options;
  options.job_id = "goodput";
  options.worker_id = "w0";
  options.shard_addresses = addresses;
  options.chunks = *chunks;
  options.rpc_timeout = absl::Seconds(60);
  auto client = GrpcParameterClient::Create(std::move(options));
  if (!client.ok()) return Fail(client.status());

  std::vector<float> grads(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) grads[i] = 1e-3f * static_cast<float>(i % 7);
  std::vector<float> params(static_cast<size_t>(n), 0.0f);
  const double payload = static_cast<double>(n) * sizeof(float);  // one way

  Phases phases;
  const bool sync = f.consistency == "sync";
  // Finalize on push + pull ahead, as a sync worker does: the push names
  // its step's (one-worker) contributor set, the pull of the next version
  // is started before the push, so each shard's weights come back while
  // the other shards are still being pushed to.
  const bool on_push = f.consistency == "sync-on-push";
  TransferBytes bytes_before;
  double cpu_before = 0, cpu_before_children = 0;
  for (int i = 0; i < f.warmup + f.iters; ++i) {
    if (i == f.warmup) {
      bytes_before = (*client)->bytes();
      cpu_before = SelfCpuSeconds();
      for (const ChildShard& c : children)
        cpu_before_children += ProcessCpuSeconds(c.pid);
    }
    const absl::Time t0 = absl::Now();
    PushInfo info;
    info.step = i;
    info.num_samples = 1;
    info.base_version = i;
    std::unique_ptr<PendingPull> ahead;
    if (on_push) {
      info.step_contributors = {{"w0", 1}};
      auto started = (*client)->StartPull(i + 1, params.data());
      if (!started.ok()) return Fail(started.status());
      ahead = *std::move(started);
    }
    auto session = (*client)->BeginPush(info);
    if (!session.ok()) return Fail(session.status());
    if (absl::Status s = (*session)->Ready(0, n, grads.data()); !s.ok())
      return Fail(s);
    if (absl::Status s = (*session)->Finish(); !s.ok()) return Fail(s);
    const absl::Time t1 = absl::Now();
    if (sync) {
      if (absl::Status s = Finalize(stubs, i); !s.ok()) return Fail(s);
    }
    const absl::Time t2 = absl::Now();
    auto version =
        on_push ? ahead->Wait() : (*client)->Pull(i + 1, params.data());
    if (!version.ok()) return Fail(version.status());
    const absl::Time t3 = absl::Now();
    if (*version != i + 1) {
      return Fail(absl::InternalError(
          absl::StrCat("pulled version ", *version, ", expected ", i + 1)));
    }
    // SGD from 0.5 with lr 1e-3: element 1 (gradient 1e-3) must have moved.
    if (!(params[1] < 0.5f) || !(params[n - 1] <= 0.5f)) {
      return Fail(absl::InternalError("pulled parameters were not updated"));
    }
    if (i < f.warmup) continue;
    phases.push_s.push_back(absl::ToDoubleSeconds(t1 - t0));
    phases.finalize_s.push_back(absl::ToDoubleSeconds(t2 - t1));
    phases.pull_s.push_back(absl::ToDoubleSeconds(t3 - t2));
    phases.iter_s.push_back(absl::ToDoubleSeconds(t3 - t0));
  }
  const TransferBytes bytes_after = (*client)->bytes();
  // In-process shards count as this process (client_cpu_s then covers both).
  const double client_cpu_s = SelfCpuSeconds() - cpu_before;
  double server_cpu_s = -cpu_before_children;
  for (const ChildShard& c : children) server_cpu_s += ProcessCpuSeconds(c.pid);
  for (PsServer& server : servers) server.Shutdown(absl::Seconds(1));
  for (ChildShard& child : children) StopShard(child);

  std::vector<double> core;
  if (f.core_baseline) {
    auto times = CoreBaseline(f, n, grads, params);
    if (!times.ok()) return Fail(times.status());
    core = *std::move(times);
  }

  const double total_s = Sum(phases.iter_s);
  const double mb = 1e6;
  std::string json = absl::StrFormat(
      "{\n"
      "  \"bench\": \"ps_goodput\",\n"
      "  \"transport\": \"grpc loopback 127.0.0.1, %s\",\n"
      "  \"glibc_tunables\": \"%s\",\n"
      "  \"consistency\": \"%s\",\n"
      "  \"shards\": %d,\n"
      "  \"partitions\": %d,\n"
      "  \"model_bytes\": %.0f,\n"
      "  \"chunk_bytes\": %d,\n"
      "  \"receive_window_bytes\": %d,\n"
      "  \"iters\": %d,\n"
      "  \"warmup\": %d,\n"
      "  \"payload_bytes\": %.0f,\n"
      "  \"wire_bytes_sent\": %d,\n"
      "  \"wire_bytes_received\": %d,\n"
      "  \"total_s\": %.6f,\n"
      "  \"goodput_MBps\": %.1f,\n"
      "  \"goodput_MBps_median_iter\": %.1f,\n"
      "  \"goodput_MBps_best_iter\": %.1f,\n"
      "  \"push_MBps\": %.1f,\n"
      "  \"pull_MBps\": %.1f,\n"
      "  \"push_s_median\": %.6f,\n"
      "  \"finalize_s_median\": %.6f,\n"
      "  \"pull_s_median\": %.6f,\n"
      "  \"iter_s_median\": %.6f,\n"
      "  \"core_s_median\": %.6f,\n"
      "  \"core_MBps\": %.1f,\n"
      "  \"client_cpu_s_per_iter\": %.4f,\n"
      "  \"server_cpu_s_per_iter\": %.4f,\n"
      "  \"cpu_ms_per_MB\": %.3f\n"
      "}\n",
      f.in_process ? "shard servers in this process"
                   : "one process per shard server",
      std::getenv("GLIBC_TUNABLES") == nullptr ? ""
                                               : std::getenv("GLIBC_TUNABLES"),
      f.consistency, f.shards, f.partitions, payload, f.chunk_kib * 1024,
      f.receive_window, f.iters, f.warmup, 2 * payload * f.iters,
      bytes_after.sent - bytes_before.sent,
      bytes_after.received - bytes_before.received, total_s,
      2 * payload * f.iters / total_s / mb,
      2 * payload / Median(phases.iter_s) / mb,
      2 * payload / Min(phases.iter_s) / mb,
      payload * f.iters / Sum(phases.push_s) / mb,
      payload * f.iters / Sum(phases.pull_s) / mb, Median(phases.push_s),
      Median(phases.finalize_s), Median(phases.pull_s), Median(phases.iter_s),
      Median(core), core.empty() ? 0.0 : 2 * payload / Median(core) / mb,
      client_cpu_s / f.iters, f.in_process ? 0.0 : server_cpu_s / f.iters,
      1e3 * (client_cpu_s + (f.in_process ? 0.0 : server_cpu_s)) /
          (2 * payload * f.iters / mb));
  std::fputs(json.c_str(), stdout);
  return 0;
}

}  // namespace
}  // namespace ferry

int main(int argc, char** argv) {
  // Both roles run with the allocator settings of ferry-worker and
  // ferry-server (FERRY_NO_MALLOC_TUNING=1 measures without them).
  ferry::TuneAllocatorForLargeMessages(argv);
  ferry::Flags f;
  CLI::App app{
      "PS push+pull goodput: one GrpcParameterClient pushes a whole gradient "
      "to in-process PS shard servers on 127.0.0.1 and pulls the whole model "
      "back, --iters times after --warmup; prints JSON (MB = 1e6 bytes)."};
  app.add_option("--mib", f.mib, "model size in MiB of fp32")
      ->capture_default_str();
  app.add_option("--iters", f.iters, "timed push+pull iterations")
      ->capture_default_str();
  app.add_option("--warmup", f.warmup, "untimed iterations first")
      ->capture_default_str();
  app.add_option("--shards", f.shards, "PS shard processes")
      ->capture_default_str();
  app.add_option("--partitions", f.partitions,
                 "logical shards per shard process, each its own server "
                 "(ferry-server --partitions)")
      ->capture_default_str();
  app.add_option("--chunk-kib", f.chunk_kib,
                 "largest chunk in KiB (max_chunk_elements = 256 * this)")
      ->capture_default_str();
  app.add_option("--receive-window", f.receive_window,
                 "bytes of a push stream a shard reads ahead (ferry-server "
                 "--receive-window); 0: gRPC's adaptive window")
      ->capture_default_str();
  app.add_option("--consistency", f.consistency,
                 "async: apply on arrival; sync: + FinalizeStep per step; "
                 "sync-on-push: shards finalize on the push, the pull is "
                 "started ahead (a sync worker's path)")
      ->check(CLI::IsMember({"async", "sync", "sync-on-push"}))
      ->capture_default_str();
  app.add_flag("!--no-core-baseline", f.core_baseline,
               "skip timing the shard core alone (no gRPC)");
  app.add_flag("--in-process", f.in_process,
               "serve the shards from threads of this process instead of "
               "one child process per shard");
  app.add_option("--serve-shard", f.serve_shard,
                 "internal: serve this shard id, print its port, run until "
                 "stdin closes")
      ->group("");
  CLI11_PARSE(app, argc, argv);
  if (f.serve_shard >= 0) return ferry::ServeShard(f);
  signal(SIGPIPE, SIG_IGN);
  return ferry::Run(f);
}

// ferry-ring-allreduce: all-reduce (sum, fp32) bandwidth of ferry's ring
// (RingCollective::AllReduceSum over GrpcRingTransport, the code ring-mode
// workers run) between separate processes on loopback.
// bench/compare_allreduce.sh puts it next to torch.distributed (gloo) and
// iperf3 in the same run.
//
// Launcher mode (default): for every size (or, with --same-processes, once
// for all sizes) starts `--ranks` copies of this program, one per rank, with
// `--rank r --rendezvous DIR`. Every rank starts its RingPeer
// server on 127.0.0.1:0, writes the bound port to DIR/rank<r>.port and waits
// for the other ranks' files, then builds the ring (generation 1). Rank 0
// prints one JSON line per size on stdout. Every wait has a deadline; a rank
// that fails makes the launcher stop the others and exit 1.
// Rank mode can also be started by hand with `--rank r --peers h:p,h:p,...`
// (rank r listens on the r-th address).
//
// Per size S (bytes, fp32): `--warmup` untimed ops, then `--iters` timed
// ones. Every op: reset the buffer to this rank's input (untimed), barrier
// (a one-float all-reduce), time AllReduceSum on the whole buffer, verify
// the sum (untimed). Rank r's input is (r + 1) * (1 + i % 1021), so the
// exact sum is n(n+1)/2 * (1 + i % 1021): integers far below 2^24, exact in
// fp32 whatever the summation order. Reported (nccl-tests definitions):
// seconds_per_op = median over the timed ops of rank 0's time,
// algbw = S / t, busbw = algbw * 2(n-1)/n, GB = 1e9 bytes.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/allocator_tuning.h"
#include "proto/rpc_util.h"
#include "ring/grpc_ring_transport.h"
#include "ring/ring_collective.h"
#include "ring/ring_peer_service.h"

namespace ferry {
namespace {

constexpr char kJobId[] = "ferry-ring-allreduce";
constexpr int kPattern = 1021;  // prime: no segment boundary aliases it

struct Flags {
  int ranks = 2;
  std::string sizes_mib = "1,16,64";
  int iters = 10;
  int warmup = 2;
  double piece_mib = 1.0;  // RingCollectiveOptions::piece_elements * 4 B
  double timeout_s = 170;  // launcher: whole run
  double op_timeout_s = 60;
  double startup_timeout_s = 30;
  bool verify = true;
  bool shared_memory = true;    // links between ranks (ring/shm_link.h)
  bool same_processes = false;  // launcher: all sizes in one set of ranks
  // Rank mode.
  int rank = -1;
  std::string rendezvous;
  std::string peers;
};

absl::StatusOr<std::vector<int64_t>> ParseSizes(const std::string& csv) {
  std::vector<int64_t> bytes;
  for (absl::string_view s : absl::StrSplit(csv, ',', absl::SkipEmpty())) {
    double mib = 0;
    if (!absl::SimpleAtod(s, &mib) || mib <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad size '", s, "' in --sizes-mib"));
    }
    const int64_t b = static_cast<int64_t>(mib * (1 << 20)) / 4 * 4;
    if (b < 4) return absl::InvalidArgumentError("a size below one float");
    bytes.push_back(b);
  }
  if (bytes.empty()) return absl::InvalidArgumentError("--sizes-mib is empty");
  return bytes;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// ---------------------------------------------------------------- rank mode

// Peer addresses: from --peers, or from the rendezvous directory once every
// rank wrote its port there (this rank's own port first).
absl::StatusOr<std::vector<std::string>> Rendezvous(const Flags& f, int port) {
  namespace fs = std::filesystem;
  const fs::path dir(f.rendezvous);
  const std::string mine =
      (dir / absl::StrCat("rank", f.rank, ".port")).string();
  {
    std::ofstream out(mine + ".tmp");
    out << port << "\n";
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", mine));
  }
  std::error_code ec;
  fs::rename(mine + ".tmp", mine, ec);  // atomic: readers never see half
  if (ec)
    return absl::InternalError(
        absl::StrCat("rename ", mine, ": ", ec.message()));
  const absl::Time deadline = absl::Now() + absl::Seconds(f.startup_timeout_s);
  std::vector<std::string> peers(f.ranks);
  for (int r = 0; r < f.ranks; ++r) {
    const std::string path = (dir / absl::StrCat("rank", r, ".port")).string();
    for (;;) {
      std::ifstream in(path);
      int p = 0;
      if (in >> p && p > 0) {
        peers[r] = absl::StrCat("127.0.0.1:", p);
        break;
      }
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(absl::StrFormat(
            "rank %d: rank %d did not publish its port in %s within %.0f s",
            f.rank, r, path, f.startup_timeout_s));
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
  }
  return peers;
}

// The transport's stream fails at once when the next rank does not listen
// yet (--peers mode starts ranks in any order): wait for it first.
absl::Status WaitForNext(const Flags& f,
                         const std::vector<std::string>& peers) {
  if (f.ranks == 1) return absl::OkStatus();
  const std::string& next = peers[(f.rank + 1) % f.ranks];
  const absl::Time deadline = absl::Now() + absl::Seconds(f.startup_timeout_s);
  std::shared_ptr<grpc::Channel> channel = MakeChannel(next);
  while (!channel->WaitForConnected(
      absl::ToChronoTime(std::min(deadline, absl::Now() + absl::Seconds(1))))) {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrFormat("rank %d: the next rank's peer server %s is not "
                          "reachable after %.0f s",
                          f.rank, next, f.startup_timeout_s));
    }
  }
  return absl::OkStatus();
}

class RankRunner {
 public:
  RankRunner(const Flags& f, RingTransport* transport, ByteCounter* counter)
      : f_(f),
        n_(transport->size()),
        r_(transport->rank()),
        counter_(counter),
        ring_(transport,
              RingCollectiveOptions{
                  .piece_elements = std::max<int64_t>(
                      1, static_cast<int64_t>(f.piece_mib * (1 << 20) / 4)),
                  .timeout = absl::Seconds(f.op_timeout_s)}) {}

  absl::Status Barrier() {
    float one = 1.0f;
    if (absl::Status s = ring_.AllReduceSum(next_op_++, &one, 1); !s.ok()) {
      return s;
    }
    if (one != static_cast<float>(n_)) {
      return absl::InternalError(
          absl::StrFormat("rank %d: barrier sum %g, expected %d", r_, one, n_));
    }
    return absl::OkStatus();
  }

  absl::Status RunSize(int64_t bytes) {
    const int64_t count = bytes / 4;
    std::vector<float> input(count), buf(count);
    const float total = static_cast<float>(n_ * (n_ + 1) / 2);
    for (int64_t i = 0; i < count; ++i) {
      input[i] = static_cast<float>((r_ + 1) * (1 + i % kPattern));
    }
    std::vector<double> times;
    int64_t sent_before = 0;
    for (int it = 0; it < f_.warmup + f_.iters; ++it) {
      const bool timed = it >= f_.warmup;
      std::memcpy(buf.data(), input.data(), bytes);
      if (absl::Status s = Barrier(); !s.ok()) return s;
      if (timed && times.empty()) sent_before = counter_->Get().sent;
      const auto t0 = std::chrono::steady_clock::now();
      if (absl::Status s = ring_.AllReduceSum(next_op_++, buf.data(), count);
          !s.ok()) {
        return s;
      }
      const auto t1 = std::chrono::steady_clock::now();
      if (timed)
        times.push_back(std::chrono::duration<double>(t1 - t0).count());
      if (f_.verify) {
        for (int64_t i = 0; i < count; ++i) {
          const float want = total * static_cast<float>(1 + i % kPattern);
          if (buf[i] != want) {
            return absl::DataLossError(absl::StrFormat(
                "rank %d: wrong sum at element %d of %d (%d bytes, op %d): "
                "%g, expected %g",
                r_, i, count, bytes, next_op_ - 1, buf[i], want));
          }
        }
      }
    }
    // Barrier: every rank's messages of the timed ops have been written.
    if (absl::Status s = Barrier(); !s.ok()) return s;
    const int64_t sent = counter_->Get().sent - sent_before;
    if (r_ == 0 && f_.iters > 0) {
      const double t = Median(times);
      double mean = 0;
      for (double x : times) mean += x;
      mean /= times.size();
      const double algbw = t > 0 ? bytes / t / 1e9 : 0;
      const double busbw = algbw * 2.0 * (n_ - 1) / n_;
      absl::PrintF(
          "{\"impl\": \"ferry\", \"ranks\": %d, \"bytes\": %d, \"iters\": %d, "
          "\"seconds_per_op\": %.6f, \"mean_seconds_per_op\": %.6f, "
          "\"min_seconds_per_op\": %.6f, \"algbw_gbps\": %.4f, "
          "\"busbw_gbps\": %.4f, \"piece_bytes\": %d, "
          "\"wire_bytes_per_op_rank0\": %d}\n",
          n_, bytes, f_.iters, t, mean,
          *std::min_element(times.begin(), times.end()), algbw, busbw,
          ring_.options().piece_elements * 4, sent / f_.iters);
      std::fflush(stdout);
    }
    return absl::OkStatus();
  }

 private:
  const Flags& f_;
  const int n_;
  const int r_;
  ByteCounter* const counter_;
  RingCollective ring_;
  int64_t next_op_ = 1;
};

absl::Status RunRank(const Flags& f, const std::vector<int64_t>& sizes) {
  std::vector<std::string> peers;
  std::string listen = "127.0.0.1:0";
  if (!f.peers.empty()) {
    peers = absl::StrSplit(f.peers, ',', absl::SkipEmpty());
    if (static_cast<int>(peers.size()) != f.ranks || f.rank >= f.ranks) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--peers lists %d addresses for --ranks %d (rank %d)",
                          peers.size(), f.ranks, f.rank));
    }
    listen = peers[f.rank];
  } else if (f.rendezvous.empty()) {
    return absl::InvalidArgumentError(
        "rank mode needs --rendezvous or --peers");
  }
  absl::StatusOr<std::unique_ptr<RingPeerServer>> server =
      StartRingPeerServer(listen);
  if (!server.ok()) return server.status();
  (*server)->service->set_job_id(kJobId);
  if (f.peers.empty()) {
    absl::StatusOr<std::vector<std::string>> found =
        Rendezvous(f, (*server)->port);
    if (!found.ok()) return found.status();
    peers = *std::move(found);
  }
  if (absl::Status s = WaitForNext(f, peers); !s.ok()) return s;
  GrpcRingTransportOptions options;
  options.job_id = kJobId;
  options.generation = 1;
  options.rank = f.rank;
  for (int r = 0; r < f.ranks; ++r) {
    options.ring.push_back({absl::StrCat("bench-", r), peers[r]});
  }
  options.mailbox = (*server)->mailbox.get();
  options.counter = (*server)->counter.get();
  options.shared_memory = f.shared_memory;
  absl::StatusOr<std::unique_ptr<GrpcRingTransport>> transport =
      GrpcRingTransport::Create(std::move(options));
  if (!transport.ok()) return transport.status();
  absl::Status status;
  {
    RankRunner runner(f, transport->get(), (*server)->counter.get());
    status = runner.Barrier();  // connects the ring
    for (int64_t bytes : sizes) {
      if (!status.ok()) break;
      status = runner.RunSize(bytes);
    }
  }
  transport->reset();  // half-closes our stream, waits up to 1 s
  (*server)->server->Shutdown(
      absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  return status;
}

// ------------------------------------------------------------ launcher mode

struct Child {
  int rank = 0;
  pid_t pid = -1;
  bool done = false;
};

std::string DescribeExit(int wstatus) {
  if (WIFEXITED(wstatus))
    return absl::StrCat("exited with code ", WEXITSTATUS(wstatus));
  if (WIFSIGNALED(wstatus)) {
    return absl::StrCat("was killed by signal ", WTERMSIG(wstatus), " (",
                        strsignal(WTERMSIG(wstatus)), ")");
  }
  return "ended";
}

void StopAll(std::vector<Child>& children) {
  for (Child& c : children) {
    if (!c.done) kill(c.pid, SIGTERM);
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(2);
  for (Child& c : children) {
    while (!c.done) {
      int ws = 0;
      const pid_t got = waitpid(c.pid, &ws, WNOHANG);
      if (got == c.pid || got < 0) {
        c.done = true;
        break;
      }
      if (absl::Now() > deadline) {
        kill(c.pid, SIGKILL);
        waitpid(c.pid, &ws, 0);
        c.done = true;
        break;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
  }
}

// Runs one set of rank processes for `sizes_mib`; 0 when all of them
// exited 0 before `deadline`.
int LaunchSet(const Flags& f, const std::string& sizes_mib,
              absl::Time deadline) {
  char tmpl[] = "/tmp/ferry-ring-allreduce.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    std::fprintf(stderr, "ferry-ring-allreduce: mkdtemp: %s\n",
                 strerror(errno));
    return 1;
  }
  const std::string dir = tmpl;
  const std::string self =
      std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<Child> children;
  int rc = 0;
  for (int r = 0; r < f.ranks && rc == 0; ++r) {
    std::vector<std::string> args = {self,
                                     "--rank",
                                     absl::StrCat(r),
                                     "--ranks",
                                     absl::StrCat(f.ranks),
                                     "--rendezvous",
                                     dir,
                                     "--sizes-mib",
                                     sizes_mib,
                                     "--iters",
                                     absl::StrCat(f.iters),
                                     "--warmup",
                                     absl::StrCat(f.warmup),
                                     "--piece-mib",
                                     absl::StrCat(f.piece_mib),
                                     "--op-timeout-s",
                                     absl::StrCat(f.op_timeout_s),
                                     "--startup-timeout-s",
                                     absl::StrCat(f.startup_timeout_s),
                                     "--verify",
                                     f.verify ? "true" : "false",
                                     "--shared-memory",
                                     f.shared_memory ? "true" : "false"};
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
      std::fprintf(stderr, "ferry-ring-allreduce: fork: %s\n", strerror(errno));
      rc = 1;
      break;
    }
    if (pid == 0) {
      // Dies with the launcher, whatever kills it.
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(1);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(self.c_str(), argv.data());
      std::fprintf(stderr, "ferry-ring-allreduce: exec %s: %s\n", self.c_str(),
                   strerror(errno));
      _exit(127);
    }
    children.push_back({r, pid, false});
  }
  int remaining = static_cast<int>(children.size());
  while (rc == 0 && remaining > 0) {
    for (Child& c : children) {
      if (c.done) continue;
      int ws = 0;
      const pid_t got = waitpid(c.pid, &ws, WNOHANG);
      if (got == 0) continue;
      c.done = true;
      --remaining;
      if (got < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        std::fprintf(stderr,
                     "ferry-ring-allreduce: rank %d (pid %d, sizes %s MiB) %s; "
                     "stopping the other ranks\n",
                     c.rank, c.pid, sizes_mib.c_str(),
                     got < 0 ? "vanished" : DescribeExit(ws).c_str());
        rc = 1;
      }
    }
    if (rc != 0) break;
    if (remaining > 0 && absl::Now() > deadline) {
      std::fprintf(stderr,
                   "ferry-ring-allreduce: %d of %d ranks still running after "
                   "--timeout-s %.0f (sizes %s MiB); stopping them\n",
                   remaining, f.ranks, f.timeout_s, sizes_mib.c_str());
      rc = 1;
      break;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  StopAll(children);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return rc;
}

// By default every size runs in a fresh set of processes: what malloc kept
// from an earlier size (glibc raises its mmap threshold when a mapped chunk
// up to 32 MiB is freed) would otherwise change how many pages later sizes
// fault in, and so their result.
int Launch(const Flags& f) {
  const absl::Time deadline = absl::Now() + absl::Seconds(f.timeout_s);
  if (f.same_processes) return LaunchSet(f, f.sizes_mib, deadline);
  for (absl::string_view size :
       absl::StrSplit(f.sizes_mib, ',', absl::SkipEmpty())) {
    if (int rc = LaunchSet(f, std::string(size), deadline); rc != 0) return rc;
  }
  return 0;
}

}  // namespace
}  // namespace ferry

int main(int argc, char** argv) {
  ferry::TuneAllocatorForLargeMessages(argv);
  ferry::Flags f;
  CLI::App app{
      "ferry-ring-allreduce: all-reduce busbw (nccl-tests definition) of "
      "ferry's gRPC ring between processes on loopback. Without --rank it "
      "launches --ranks copies of itself; rank 0 prints one JSON line per "
      "size: {impl, ranks, bytes, iters, seconds_per_op (median), "
      "algbw_gbps, busbw_gbps, ...}"};
  app.add_option("--ranks", f.ranks, "number of ranks (processes)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--sizes-mib", f.sizes_mib,
                 "comma-separated buffer sizes in MiB")
      ->capture_default_str();
  app.add_option("--iters", f.iters, "timed all-reduces per size")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--warmup", f.warmup, "untimed all-reduces per size first")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option(
         "--piece-mib", f.piece_mib,
         "ring message size (RingCollectiveOptions::piece_elements * 4 B)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--timeout-s", f.timeout_s,
                 "launcher: deadline of the whole run")
      ->capture_default_str();
  app.add_option("--op-timeout-s", f.op_timeout_s, "deadline of one all-reduce")
      ->capture_default_str();
  app.add_option("--startup-timeout-s", f.startup_timeout_s,
                 "deadline for all ranks to publish their ports")
      ->capture_default_str();
  app.add_option("--verify", f.verify,
                 "check every result against the exact sum")
      ->capture_default_str();
  app.add_option("--shared-memory", f.shared_memory,
                 "ranks on one host exchange through shared-memory links "
                 "(false: loopback gRPC streams)")
      ->capture_default_str();
  app.add_flag("--same-processes", f.same_processes,
               "launcher: run all sizes in one set of rank processes (default: "
               "a fresh set per size, so allocator state left by one size does "
               "not change the next)");
  app.add_option("--rank", f.rank,
                 "rank mode: this process's rank (set by the launcher)");
  app.add_option("--rendezvous", f.rendezvous,
                 "rank mode: directory where ranks publish their ports");
  app.add_option(
      "--peers", f.peers,
      "rank mode: HOST:PORT of every rank, in rank order (instead of "
      "--rendezvous)");
  CLI11_PARSE(app, argc, argv);

  const absl::StatusOr<std::vector<int64_t>> sizes =
      ferry::ParseSizes(f.sizes_mib);
  if (!sizes.ok()) {
    std::fprintf(stderr, "ferry-ring-allreduce: %s\n",
                 sizes.status().ToString().c_str());
    return 2;
  }
  if (f.rank < 0) return ferry::Launch(f);
  if (f.rank >= f.ranks) {
    std::fprintf(stderr, "ferry-ring-allreduce: --rank %d outside --ranks %d\n",
                 f.rank, f.ranks);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  const absl::Status status = ferry::RunRank(f, *sizes);
  if (!status.ok()) {
    std::fprintf(stderr, "ferry-ring-allreduce rank %d: %s\n", f.rank,
                 status.ToString().c_str());
    return 1;
  }
  return 0;
}

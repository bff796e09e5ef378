// ferry-link-emulation: how closely PS push + pull throughput through ferry
// follows an emulated link (--link-bandwidth), on loopback.
//
// For every limit in --limits (a no-limit baseline first), this program
// starts `--shards` PsShard cores (async, so a push is applied on arrival),
// each behind its own gRPC server (StartPsServer, the code of `ferry-server
// ps`) on 127.0.0.1 in this process, and one GrpcParameterClient.
// Like `ferry local --link-bandwidth`, the worker's client and every shard
// get a LinkShaper of that limit (--worker-only: the client alone). Each
// iteration pushes the whole --mib gradient to the shards, then pulls the
// whole model back; the first --warmup iterations are not timed.
//
// Reported per limit: push and pull throughput (wire bytes the client
// counted / wall time of the timed pushes, resp. pulls; MB = 1e6 bytes),
// each over the limit (ratio; 1.0 = the link is the bottleneck and is
// followed exactly), and the delay the worker's shaper imposed. When the
// limit is above what gRPC reaches on this machine unlimited (the baseline
// row), the ratio is below 1 and says so.
//
// Usage: ferry-link-emulation [--limits 0,1Gbit,10Gbit,25Gbit] [--mib 64]
//          [--iters 5] [--warmup 1] [--shards 1] [--latency 0] [--worker-only]
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/allocator_tuning.h"
#include "common/link_shaper.h"
#include "common/sharding.h"
#include "ps/ps_client.h"
#include "ps/ps_server.h"
#include "ps/ps_shard.h"

namespace ferry {
namespace {

struct Flags {
  std::vector<std::string> limits = {"0", "1Gbit", "10Gbit", "25Gbit"};
  double mib = 64;
  int iters = 5;
  int warmup = 1;
  int shards = 1;
  std::string latency = "0";
  bool worker_only = false;
};

struct Result {
  double push_bytes = 0, push_seconds = 0;
  double pull_bytes = 0, pull_seconds = 0;
  LinkShaperStats stats;
};

absl::StatusOr<Result> Measure(const Flags& f, const LinkLimit& limit) {
  const int64_t n = static_cast<int64_t>(f.mib * (1 << 20) / sizeof(float));
  const std::vector<int64_t> sizes = {n};
  std::vector<std::unique_ptr<PsShard>> shards;
  std::vector<std::unique_ptr<LinkShaper>> shard_shapers;
  std::vector<PsServer> servers;
  std::vector<std::string> addresses;
  for (int s = 0; s < f.shards; ++s) {
    PsShardConfig config;
    config.job_id = "bench";
    config.shard_id = s;
    config.num_shards = f.shards;
    config.tensor_sizes = sizes;
    config.optimizer.kind = OptimizerKind::kSgd;
    config.optimizer.lr = 0.01;
    config.consistency = PsConsistency::kAsync;
    const FlatRange range = ShardRange(n, f.shards, s);
    config.initial_slice.assign(range.end - range.begin, 0.5f);
    auto shard = PsShard::Create(config);
    if (!shard.ok()) return shard.status();
    shards.push_back(*std::move(shard));
    shard_shapers.push_back(limit.enabled() && !f.worker_only
                                ? std::make_unique<LinkShaper>(limit)
                                : nullptr);
    auto server = StartPsServer(shards.back().get(), "127.0.0.1:0", nullptr,
                                shard_shapers.back().get());
    if (!server.ok()) return server.status();
    addresses.push_back(absl::StrCat("127.0.0.1:", server->port));
    servers.push_back(*std::move(server));
  }
  std::unique_ptr<LinkShaper> shaper =
      limit.enabled() ? std::make_unique<LinkShaper>(limit) : nullptr;
  GrpcParameterClientOptions options;
  options.job_id = "bench";
  options.worker_id = "w0";
  options.shard_addresses = addresses;
  auto chunks = PlaceChunks(sizes, f.shards);
  if (!chunks.ok()) return chunks.status();
  options.chunks = *chunks;
  options.shaper = shaper.get();
  auto client = GrpcParameterClient::Create(std::move(options));
  if (!client.ok()) return client.status();

  // Non-zero: an all-zero chunk would travel as a flag (ENCODING_ZEROS).
  std::vector<float> grads(n), params(n);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = 1e-3f * (1 + i % 7);
  Result result;
  for (int i = 0; i < f.warmup + f.iters; ++i) {
    const bool timed = i >= f.warmup;
    TransferBytes before = (*client)->bytes();
    absl::Time start = absl::Now();
    auto push = (*client)->BeginPush(PushInfo{0, i + 1, 1, 0, {}});
    if (!push.ok()) return push.status();
    if (absl::Status s = (*push)->Ready(0, n, grads.data()); !s.ok()) return s;
    if (absl::Status s = (*push)->Finish(); !s.ok()) return s;
    TransferBytes after = (*client)->bytes();
    if (timed) {
      result.push_seconds += absl::ToDoubleSeconds(absl::Now() - start);
      result.push_bytes += static_cast<double>(after.sent - before.sent);
    }
    before = after;
    start = absl::Now();
    auto version = (*client)->Pull(0, params.data());
    if (!version.ok()) return version.status();
    after = (*client)->bytes();
    if (timed) {
      result.pull_seconds += absl::ToDoubleSeconds(absl::Now() - start);
      result.pull_bytes +=
          static_cast<double>(after.received - before.received);
    }
  }
  if (shaper != nullptr) result.stats = shaper->stats();
  client->reset();
  for (PsServer& server : servers) server.Shutdown();
  return result;
}

int Run(const Flags& f) {
  absl::StatusOr<absl::Duration> latency = ParseLatency(f.latency);
  if (!latency.ok()) {
    std::fprintf(stderr, "ferry-link-emulation: %s\n",
                 std::string(latency.status().message()).c_str());
    return 2;
  }
  std::printf(
      "# %.0f MiB per push and per pull, %d timed iterations, %d shard(s), "
      "%s shaped, latency %s; MB = 1e6 bytes\n",
      f.mib, f.iters, f.shards,
      f.worker_only ? "worker only" : "worker and shards",
      absl::FormatDuration(*latency).c_str());
  std::printf("%-10s %10s %10s %8s %10s %8s %10s %8s %9s\n", "limit",
              "limit_MB/s", "push_MB/s", "ratio", "pull_MB/s", "ratio",
              "both_MB/s", "ratio", "delay_s");
  for (const std::string& text : f.limits) {
    absl::StatusOr<double> rate = ParseBandwidth(text);
    if (!rate.ok()) {
      std::fprintf(stderr, "ferry-link-emulation: --limits: %s\n",
                   std::string(rate.status().message()).c_str());
      return 2;
    }
    const LinkLimit limit{*rate, *latency};
    absl::StatusOr<Result> r = Measure(f, limit);
    if (!r.ok()) {
      std::fprintf(stderr, "ferry-link-emulation: %s: %s\n", text.c_str(),
                   r.status().ToString().c_str());
      return 1;
    }
    const double push = r->push_bytes / r->push_seconds / 1e6;
    const double pull = r->pull_bytes / r->pull_seconds / 1e6;
    const double both = (r->push_bytes + r->pull_bytes) /
                        (r->push_seconds + r->pull_seconds) / 1e6;
    const double lim = *rate / 1e6;
    const auto ratio = [&](double v) { return lim > 0 ? v / lim : 0.0; };
    std::printf(
        "%-10s %10.1f %10.1f %8.3f %10.1f %8.3f %10.1f %8.3f %9.3f\n",
        *rate > 0 ? text.c_str() : "unlimited", lim, push, ratio(push), pull,
        ratio(pull), both, ratio(both),
        absl::ToDoubleSeconds(r->stats.send_delay + r->stats.receive_delay));
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace ferry

int main(int argc, char** argv) {
  ferry::TuneAllocatorForLargeMessages(argv);
  CLI::App app{"ferry-link-emulation: PS throughput vs an emulated link limit"};
  ferry::Flags f;
  app.add_option("--limits", f.limits,
                 "link bandwidths to measure (0: unlimited)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--mib", f.mib, "MiB pushed and pulled per iteration")
      ->capture_default_str();
  app.add_option("--iters", f.iters, "timed iterations")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", f.warmup, "untimed iterations first")
      ->capture_default_str();
  app.add_option("--shards", f.shards, "PS shards (servers in this process)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--latency", f.latency, "--link-latency of every shaper")
      ->capture_default_str();
  app.add_flag("--worker-only", f.worker_only,
               "shape the worker's client only");
  CLI11_PARSE(app, argc, argv);
  return ferry::Run(f);
}

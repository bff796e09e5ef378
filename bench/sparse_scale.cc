// ferry-sparse-scale: embedding tables at scale on real PS shard processes,
// and what they cost in memory.
//
// Processes: the coordinator of a DLRM job (`ferry-server
// coordinator --model dlrm`: 26 tables of dim 16, --embedding-optimizer,
// async, on a tiny generated Criteo dataset: it never sees a worker) and
// --shards shards (`ferry-server ps --checkpoint-dir DIR/psN`),
// started from --server-bin (default: next to this binary) on 127.0.0.1
// with the launcher of `ferry local` (bench/load_cluster.h); logs and
// checkpoints under --log-dir.
//
// Load (bench/sparse_scale_load.h): --pushers threads, each with its own
// GrpcParameterClient (the options a ferry-worker derives from the job),
// push what a DLRM worker pushes: a zero dense gradient (the job's chunks)
// and row gradients of --ids-per-push new ids spread evenly over the tables
// (PushSession::AddRows: each row to the shard ShardOfRow places it on),
// until the shards hold --rows rows in all. Every id is new (a splitmix64 of a
// counter), so every row pushed is a row created (admission 1, no TTL, no
// memory limit). When the rows pushed pass each fraction of --checkpoint-at
// every shard is checkpointed at once (the Checkpoint RPC the coordinator
// sends; pushes go on meanwhile, but for the last one), and at the end the
// shards are stopped with SIGTERM (each writes its final checkpoint).
// Then (unless --no-resume) every shard is started again and resumes from
// that checkpoint (bench/sparse_scale_resume.h): its rows, version and
// peak RSS once it answers are the resume's figures.
//
// Measured per shard (/proc/PID/status every --sample-interval, and at
// each event): VmRSS at start (its baseline: gRPC, the dense slice); VmRSS
// and VmHWM once every row is in, before the last checkpoint (--checkpoint-
// at should end in 1); VmHWM after it (the peak since the process started,
// earlier checkpoints included: no sample can miss it); its rows
// (ShardInfo) and their bytes (values + optimizer state); the ratio peak /
// rows' bytes; and the index's (the hash map's) bytes per row: slots x 5 B
// (a 4-byte row number + a control byte) with the slots an absl::
// flat_hash_set reaches for the rows each of its tables got (2^k - 1
// slots, grown past 7/8 full: Abseil's growth rule), counted per (shard,
// table) by the pushers.
//
// Exit: 0 when every push and checkpoint succeeded and the shards hold
// exactly the rows pushed; 1 otherwise; 2 for bad flags or a cluster that
// did not start.
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/load_cluster.h"
#include "bench/proc_probe.h"
#include "bench/sparse_scale_load.h"
#include "bench/sparse_scale_resume.h"
#include "client/child_process.h"
#include "common/allocator_tuning.h"
#include "compute/row_optimizer_math.h"
#include "ferry/v1/ps.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "proto/job_convert.h"
#include "proto/rpc_util.h"
#include "ps/ps_client.h"
#include "worker/job_options.h"

namespace ferry {
namespace {

struct Flags {
  int64_t rows = 50'000'000;
  int shards = 4;
  int64_t ids_per_push =
      104'000;  // 4,000 per table: a batch of 4,000 new samples
  int pushers = 2;
  std::string checkpoint_at = "0.5,1";
  std::string embedding_optimizer = "adagrad";
  double sample_interval_s = 0.5;
  double rpc_timeout_s = 600;
  double stop_timeout_s = 300;
  bool resume = true;
  std::string dataset;     // default: a tiny one generated in --log-dir
  std::string server_bin;  // default: ferry-server next to this binary
  std::string ferry_bin;   // default: ferry next to this binary
  std::string log_dir;     // default: a new /tmp/ferry-sparse-scale-*
  std::string json;
};

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "ferry-sparse-scale: %s\n", status.ToString().c_str());
  return 2;
}

absl::StatusOr<std::vector<double>> ParseFractions(const std::string& text) {
  std::vector<double> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    double f = 0;
    if (!absl::SimpleAtod(part, &f) || f <= 0 || f > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--checkpoint-at: '", part, "' is not a fraction in (0, 1]"));
    }
    out.push_back(f);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Runs `argv` to completion (its output to `log`); OK on exit code 0.
absl::Status RunToEnd(const std::vector<std::string>& argv,
                      const std::string& log) {
  auto child = ChildProcess::Spawn(argv, log);
  if (!child.ok()) return child.status();
  while (true) {
    if (std::optional<int> code = child->Poll()) {
      if (*code == 0) return absl::OkStatus();
      return absl::InternalError(absl::StrCat(argv[0], " exited with code ",
                                              *code, " (see ", log, ")"));
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

int Run(Flags f) {
  auto fractions = ParseFractions(f.checkpoint_at);
  if (!fractions.ok()) return Fail(fractions.status());
  const std::string dir = ExecutableDir();
  if (f.server_bin.empty()) f.server_bin = dir + "/ferry-server";
  if (f.ferry_bin.empty()) f.ferry_bin = dir + "/ferry";
  if (f.log_dir.empty()) {
    char pattern[] = "/tmp/ferry-sparse-scale-XXXXXX";
    if (mkdtemp(pattern) == nullptr) {
      return Fail(absl::UnavailableError("cannot create a log directory"));
    }
    f.log_dir = pattern;
  }
  std::error_code error;
  std::filesystem::create_directories(f.log_dir + "/ckpt", error);
  if (error) {
    return Fail(absl::UnavailableError(
        absl::StrCat("cannot create ", f.log_dir, "/ckpt: ", error.message())));
  }
  if (f.dataset.empty()) {
    const std::string data = f.log_dir + "/data";
    absl::Status made =
        RunToEnd({f.ferry_bin, "data", "ctr", "--out", data, "--rows", "2000",
                  "--test-rows", "2000", "--seed", "1", "--quiet"},
                 f.log_dir + "/data.log");
    if (!made.ok()) return Fail(made);
    f.dataset = "criteo:" + data;
  }

  const std::string job_id = "ferry-sparse-scale";
  LoadClusterOptions options;
  options.server_bin = f.server_bin;
  options.log_dir = f.log_dir;
  options.model = "dlrm";
  options.job_id = job_id;
  options.dataset = f.dataset;
  options.coordinator_args = {"--embedding-optimizer", f.embedding_optimizer};
  options.shard_args = [&](int i) {
    return std::vector<std::string>{"--checkpoint-dir",
                                    absl::StrCat(f.log_dir, "/ckpt/ps", i)};
  };
  options.shards = f.shards;
  options.start_timeout = absl::Seconds(120);
  LoadCluster cluster;
  if (absl::Status s = StartLoadCluster(options, cluster); !s.ok()) {
    return Fail(s);
  }
  const absl::Time t0 = absl::Now();
  Sampler sampler(cluster, t0);
  sampler.Sample("start");

  auto spec = JobDlrmSpec(cluster.job);
  if (!spec.ok()) return Fail(spec.status());
  auto embedding = FromProto(cluster.job.embedding());
  if (!embedding.ok()) return Fail(embedding.status());
  auto layout = JobDenseLayout(cluster.job);
  if (!layout.ok()) return Fail(layout.status());
  Plan plan;
  plan.rows = f.rows;
  plan.ids_per_push = f.ids_per_push;
  plan.tables = spec->num_fields;
  plan.dim = spec->embedding_dim;
  plan.shards = f.shards;
  const int row_floats =
      plan.dim + RowStateFloats(embedding->optimizer.kind, plan.dim);
  const int64_t row_bytes = int64_t{row_floats} * 4;

  std::vector<std::unique_ptr<GrpcParameterClient>> clients;
  for (int p = 0; p < f.pushers; ++p) {
    auto o = ParameterClientOptionsForJob(cluster.job, "", *layout);
    if (!o.ok()) return Fail(o.status());
    o->worker_id = absl::StrCat("pusher", p);
    o->rpc_timeout = absl::Seconds(f.rpc_timeout_s);
    auto client = GrpcParameterClient::Create(*std::move(o));
    if (!client.ok()) return Fail(client.status());
    clients.push_back(*std::move(client));
  }
  std::printf(
      "ferry-sparse-scale: %lld rows of %d tables x dim %d (%s: %d floats, "
      "%lld B per row) on %d shard processes, %lld new ids per push, %d "
      "pushers; checkpoints at %s of the rows; logs and checkpoints in %s\n",
      static_cast<long long>(f.rows), plan.tables, plan.dim,
      f.embedding_optimizer.c_str(), row_floats,
      static_cast<long long>(row_bytes), f.shards,
      static_cast<long long>(f.ids_per_push), f.pushers,
      f.checkpoint_at.c_str(), f.log_dir.c_str());
  std::fflush(stdout);

  PushState state;
  state.t0 = t0;
  state.rows_per_cell.assign(static_cast<size_t>(f.shards) * plan.tables, 0);
  std::vector<std::thread> pushers;
  const absl::Time push_begin = absl::Now();
  for (auto& client : clients) {
    pushers.emplace_back([&, c = client.get()] { Push(*c, plan, state); });
  }
  std::vector<CheckpointRound> rounds;
  std::vector<std::string> failures;
  double fill_seconds = 0;
  size_t next_round = 0;
  int64_t last_print = 0;
  while (true) {
    const bool pushing = state.finished.load() < f.pushers;
    if (!pushing && fill_seconds == 0) {
      fill_seconds = absl::ToDoubleSeconds(absl::Now() - push_begin);
      sampler.Sample("filled");
    }
    if (state.failed.load()) break;
    const int64_t pushed = state.rows_pushed.load();
    if (next_round < fractions->size() &&
        pushed >= static_cast<int64_t>((*fractions)[next_round] * f.rows) &&
        (pushed < f.rows || !pushing)) {
      const std::string name = absl::StrCat("checkpoint", next_round);
      sampler.Sample(name + "_before");
      const double begin_s = absl::ToDoubleSeconds(absl::Now() - t0);
      CheckpointRound round =
          CheckpointAll(cluster, job_id, f.rpc_timeout_s, sampler,
                        std::min(f.sample_interval_s, 0.2));
      round.begin_s = begin_s;
      round.end_s = absl::ToDoubleSeconds(absl::Now() - t0);
      round.at_fraction = (*fractions)[next_round];
      round.rows_pushed = pushed;
      sampler.Sample(name + "_after");
      for (size_t i = 0; i < round.errors.size(); ++i) {
        if (!round.errors[i].empty()) {
          failures.push_back(
              absl::StrCat("checkpoint of ps", i, ": ", round.errors[i]));
        }
      }
      std::printf(
          "checkpoint at %lld rows: %s s\n", static_cast<long long>(pushed),
          absl::StrJoin(round.seconds, " / ", [](std::string* out, double s) {
            absl::StrAppendFormat(out, "%.1f", s);
          }).c_str());
      rounds.push_back(std::move(round));
      ++next_round;
      continue;
    }
    if (!pushing && next_round >= fractions->size()) break;
    sampler.Sample();
    if (pushed - last_print >= f.rows / 20) {
      last_print = pushed;
      std::printf("  %lld / %lld rows pushed, %.0f s\n",
                  static_cast<long long>(pushed),
                  static_cast<long long>(f.rows),
                  absl::ToDoubleSeconds(absl::Now() - push_begin));
      std::fflush(stdout);
    }
    absl::SleepFor(absl::Seconds(f.sample_interval_s));
  }
  for (std::thread& t : pushers) t.join();
  if (state.failed.load()) failures.push_back(state.first_error);

  // The shards' own account.
  std::vector<int64_t> shard_rows(f.shards, -1);
  for (int i = 0; i < f.shards; ++i) {
    const absl::StatusOr<v1::ShardInfoResponse> info =
        QueryShardInfo(cluster, i, absl::Seconds(30));
    if (!info.ok()) {
      failures.push_back(info.status().ToString());
      continue;
    }
    shard_rows[i] = info->sparse().rows();
  }
  sampler.Sample("end");

  // Stop the shards (each writes its final checkpoint), sampling meanwhile.
  std::vector<double> stop_seconds(f.shards, -1);
  std::vector<int> stop_codes(f.shards, -1);
  const absl::Time stop_begin = absl::Now();
  for (int i = 0; i < f.shards; ++i) cluster.procs[i + 1].Signal(SIGTERM);
  int stopped = 0;
  while (stopped < f.shards &&
         absl::Now() - stop_begin < absl::Seconds(f.stop_timeout_s)) {
    sampler.Sample();
    for (int i = 0; i < f.shards; ++i) {
      if (stop_codes[i] >= 0) continue;
      if (std::optional<int> code = cluster.procs[i + 1].Poll()) {
        stop_codes[i] = *code;
        stop_seconds[i] = absl::ToDoubleSeconds(absl::Now() - stop_begin);
        ++stopped;
      }
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  for (int i = 0; i < f.shards; ++i) {
    if (stop_codes[i] != 0) {
      failures.push_back(absl::StrCat("ps", i, " stopped with code ",
                                      stop_codes[i], " (final checkpoint)"));
    }
  }

  // The report.
  std::vector<int64_t> cell_rows;
  {
    std::lock_guard<std::mutex> lock(state.mu);
    cell_rows = state.rows_per_cell;
  }
  int64_t total_rows = 0;
  nlohmann::json shards_json = nlohmann::json::array();
  std::printf(
      "\nshard       rows  rows' MiB  start RSS  filled RSS  peak before last "
      "ckpt  peak after  peak/rows  (peak-start)/rows  index B/row  ckpt s  "
      "file MiB  (MiB)\n");
  for (int i = 0; i < f.shards; ++i) {
    const ProcTrack& t = sampler.track(i + 1);
    int64_t counted = 0, slots = 0;
    for (int table = 0; table < plan.tables; ++table) {
      const int64_t n = cell_rows[i * plan.tables + table];
      counted += n;
      slots += IndexSlots(n);
    }
    total_rows += shard_rows[i];
    if (shard_rows[i] != counted) {
      failures.push_back(absl::StrCat("ps", i, " holds ", shard_rows[i],
                                      " rows; ", counted,
                                      " were pushed to it"));
    }
    const double rows_mib = static_cast<double>(counted) *
                            static_cast<double>(row_bytes) / (1 << 20);
    auto at = [&](const std::string& p) {
      auto it = t.points.find(p);
      return it == t.points.end() ? ProcSample{} : it->second;
    };
    // The last round runs once every row is in (--checkpoint-at ends in 1):
    // before it, the filled shard; after it, the peak with checkpoints.
    const std::string last =
        rounds.empty() ? "" : absl::StrCat("checkpoint", rounds.size() - 1);
    const ProcSample filled =
        rounds.empty() ? at("filled") : at(last + "_before");
    const int64_t peak_kib =
        rounds.empty() ? filled.hwm_kib : at(last + "_after").hwm_kib;
    const double index_per_row =
        counted > 0 ? 5.0 * static_cast<double>(slots) / counted : 0;
    const double peak_ratio = peak_kib / 1024.0 / rows_mib;
    const double net_ratio = (peak_kib - t.start_rss_kib) / 1024.0 / rows_mib;
    double ckpt_s = 0;
    int64_t file_bytes = 0;
    for (const CheckpointRound& r : rounds) {
      ckpt_s = std::max(ckpt_s, r.seconds[i]);
      file_bytes = std::max(file_bytes, r.file_bytes[i]);
    }
    std::printf(
        "ps%-3d %10lld  %9.1f  %9.1f  %10.1f  %21.1f  %10.1f  %9.3f  %17.3f  "
        "%11.1f  %6.1f  %8.1f\n",
        i, static_cast<long long>(shard_rows[i]), rows_mib,
        t.start_rss_kib / 1024.0, filled.rss_kib / 1024.0,
        filled.hwm_kib / 1024.0, peak_kib / 1024.0, peak_ratio, net_ratio,
        index_per_row, ckpt_s, file_bytes / 1048576.0);
    nlohmann::json ckpts = nlohmann::json::array();
    for (const CheckpointRound& r : rounds) {
      ckpts.push_back({{"at_fraction", r.at_fraction},
                       {"rows_pushed", r.rows_pushed},
                       {"seconds", r.seconds[i]},
                       {"version", r.version[i]},
                       {"file_bytes", r.file_bytes[i]}});
    }
    nlohmann::json samples = nlohmann::json::array();
    for (const ProcSample& s : t.samples) {
      samples.push_back({s.t_s, s.rss_kib, s.hwm_kib});
    }
    shards_json.push_back(
        {{"shard", i},
         {"pid", cluster.procs[i + 1].pid()},
         {"rows", shard_rows[i]},
         {"rows_pushed_to_it", counted},
         {"row_bytes_each", row_bytes},
         {"rows_mib", rows_mib},
         {"start_rss_mib", t.start_rss_kib / 1024.0},
         {"filled_rss_mib", filled.rss_kib / 1024.0},
         {"peak_before_last_checkpoint_mib", filled.hwm_kib / 1024.0},
         {"peak_mib", peak_kib / 1024.0},
         {"max_sampled_rss_mib", t.max_rss_kib / 1024.0},
         {"max_hwm_seen_mib", t.hwm_kib / 1024.0},
         {"end_rss_mib", at("end").rss_kib / 1024.0},
         {"peak_over_rows", peak_ratio},
         {"peak_minus_start_over_rows", net_ratio},
         {"index_slots", slots},
         {"index_bytes_per_row", index_per_row},
         {"checkpoints", ckpts},
         {"stop_seconds", stop_seconds[i]},
         {"stop_code", stop_codes[i]},
         {"samples_t_rss_hwm_kib", samples}});
  }
  // Push latencies: all, and those that overlapped a checkpoint (the
  // shards' lock is held while a checkpoint's bytes are written).
  std::vector<float> all_ms, during_ms;
  {
    std::lock_guard<std::mutex> lock(state.mu);
    for (const auto& [b, e] : state.push_times) {
      all_ms.push_back(static_cast<float>(1000 * (e - b)));
      for (const CheckpointRound& r : rounds) {
        if (b < r.end_s && e > r.begin_s) {
          during_ms.push_back(all_ms.back());
          break;
        }
      }
    }
  }
  // The resume from the final checkpoints.
  nlohmann::json resume_json = nlohmann::json::array();
  const bool all_stopped = std::all_of(stop_codes.begin(), stop_codes.end(),
                                       [](int code) { return code == 0; });
  if (f.resume && all_stopped) {
    const std::vector<ShardResume> resumed =
        ResumeShards(options, cluster, absl::Seconds(f.stop_timeout_s));
    for (int i = 0; i < f.shards; ++i) {
      const ShardResume& r = resumed[i];
      const double rows_mib =
          static_cast<double>(std::max<int64_t>(shard_rows[i], 0)) *
          static_cast<double>(row_bytes) / (1 << 20);
      const double ratio =
          r.peak_kib > 0 && rows_mib > 0 ? r.peak_kib / 1024.0 / rows_mib : 0;
      if (!r.error.empty()) {
        failures.push_back(absl::StrCat("ps", i, " resume: ", r.error));
      } else if (r.rows != shard_rows[i]) {
        failures.push_back(absl::StrCat("ps", i, " resumed with ", r.rows,
                                        " rows, not ", shard_rows[i]));
      } else {
        std::printf(
            "ps%d resumed: %lld rows at version %lld in %.1f s, peak %.1f MiB "
            "(%.3f x its rows' %.1f MiB)\n",
            i, static_cast<long long>(r.rows),
            static_cast<long long>(r.version), r.seconds, r.peak_kib / 1024.0,
            ratio, rows_mib);
      }
      resume_json.push_back({{"shard", i},
                             {"rows", r.rows},
                             {"version", r.version},
                             {"seconds", r.seconds},
                             {"peak_mib", r.peak_kib / 1024.0},
                             {"peak_over_rows", ratio},
                             {"error", r.error}});
    }
  }
  const LatencySummary all_push = Summarize(all_ms);
  const LatencySummary during_push = Summarize(during_ms);
  std::printf(
      "push latency ms: p50 %.0f, p99 %.0f, max %.0f (%lld pushes); "
      "overlapping a checkpoint: p50 %.0f, max %.0f (%lld pushes)\n",
      all_push.p50, all_push.p99, all_push.max,
      static_cast<long long>(all_push.count), during_push.p50, during_push.max,
      static_cast<long long>(during_push.count));
  std::printf(
      "total: %lld rows, filled in %.1f s (%.0f rows/s, %lld pushes); "
      "shutdown checkpoints and exits: %s s\n",
      static_cast<long long>(total_rows), fill_seconds,
      fill_seconds > 0 ? static_cast<double>(total_rows) / fill_seconds : 0,
      static_cast<long long>(state.pushes.load()),
      absl::StrJoin(stop_seconds, " / ", [](std::string* out, double s) {
        absl::StrAppendFormat(out, "%.1f", s);
      }).c_str());
  for (const std::string& why : failures) {
    std::printf("FAIL: %s\n", why.c_str());
  }
  const bool pass = failures.empty() && total_rows == f.rows;
  std::printf("verdict: %s\n", pass ? "PASS" : "FAIL");
  if (!f.json.empty()) {
    const nlohmann::json j = {
        {"bench", "sparse_scale"},
        {"rows", f.rows},
        {"rows_held", total_rows},
        {"shards", f.shards},
        {"tables", plan.tables},
        {"dim", plan.dim},
        {"embedding_optimizer", f.embedding_optimizer},
        {"row_bytes_each", row_bytes},
        {"ids_per_push", f.ids_per_push},
        {"pushers", f.pushers},
        {"fill_seconds", fill_seconds},
        {"rows_per_second",
         fill_seconds > 0 ? static_cast<double>(total_rows) / fill_seconds : 0},
        {"push_ms",
         {{"p50", all_push.p50},
          {"p99", all_push.p99},
          {"max", all_push.max},
          {"count", all_push.count}}},
        {"push_ms_overlapping_checkpoints",
         {{"p50", during_push.p50},
          {"max", during_push.max},
          {"count", during_push.count}}},
        {"checkpoint_rounds_s",
         [&] {
           nlohmann::json out = nlohmann::json::array();
           for (const CheckpointRound& r : rounds) {
             out.push_back({r.begin_s, r.end_s});
           }
           return out;
         }()},
        {"per_shard", shards_json},
        {"resume", resume_json},
        {"failures", failures},
        {"verdict", pass ? "PASS" : "FAIL"},
        {"log_dir", f.log_dir}};
    std::ofstream out(f.json);
    out << j.dump(1) << "\n";
  }
  return pass ? 0 : 1;
}

}  // namespace
}  // namespace ferry

int main(int argc, char** argv) {
  ferry::TuneAllocatorForLargeMessages(argv);  // as ferry-worker runs
  ferry::Flags f;
  CLI::App app{
      "ferry-sparse-scale: fills the embedding tables of a DLRM job's real "
      "PS shard processes with --rows rows of new ids over gRPC, checkpoints "
      "every shard, and reports each shard's rows, their bytes and its peak "
      "RSS (VmHWM)."};
  app.add_option("--rows", f.rows, "rows to create, over all shards")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 36));
  app.add_option("--shards", f.shards, "PS shard processes")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--ids-per-push", f.ids_per_push,
                 "new ids per push, over all tables")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{4} << 20));
  app.add_option("--pushers", f.pushers, "pushing threads (one client each)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--checkpoint-at", f.checkpoint_at,
                 "checkpoint every shard when the rows pushed pass these "
                 "fractions of --rows (comma separated)")
      ->capture_default_str();
  app.add_option("--embedding-optimizer", f.embedding_optimizer,
                 "the rows' optimizer: sgd, adagrad or ftrl")
      ->capture_default_str();
  app.add_option("--sample-interval", f.sample_interval_s,
                 "seconds between /proc samples")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--rpc-timeout", f.rpc_timeout_s,
                 "deadline of every push and checkpoint, s")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--dataset", f.dataset,
                 "the coordinator's criteo:DIR (default: 2,000 generated "
                 "rows in --log-dir)");
  app.add_option("--server-bin", f.server_bin,
                 "ferry-server binary (default: next to this program)");
  app.add_option("--ferry-bin", f.ferry_bin,
                 "ferry binary for `ferry data ctr` (default: next to this "
                 "program)");
  app.add_option("--log-dir", f.log_dir,
                 "logs, checkpoints and data (default: a new "
                 "/tmp/ferry-sparse-scale-*)");
  app.add_option("--json", f.json, "also write the results here as JSON");
  app.add_flag("--resume,!--no-resume", f.resume,
               "after the shards stopped, start them again from their "
               "checkpoints and report each one's resume (default: on)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  signal(SIGPIPE, SIG_IGN);
  return ferry::Run(f);
}

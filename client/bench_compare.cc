#include "client/bench_compare.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "client/child_process.h"
#include "client/cost_command.h"
#include "client/cost_model.h"
#include "client/sparse_cost_command.h"
#include "client/sparse_cost_model.h"
#include "common/link_shaper.h"
#include "common/progress.h"
#include "common/status_macros.h"
#include "model/dlrm_spec.h"

#ifndef FERRY_SOURCE_DIR
#define FERRY_SOURCE_DIR "."
#endif

namespace ferry {
namespace {

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, " was not written"));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(path, ": ", e.what()));
  }
}

absl::StatusOr<std::vector<nlohmann::json>> ReadJsonLines(
    const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, " was not written"));
  std::vector<nlohmann::json> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      lines.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::exception&) {
      // A line cut short by the process ending mid-write: skip it.
    }
  }
  return lines;
}

constexpr char kLabLr[] = "0.01";

// Where a run of a script's model (--worker-command) has the job's weights
// written: the cost model reads its tensors there.
std::string ExportDir(const std::string& dir) { return dir + "/export"; }

// The `ferry local` command line of one run.
std::vector<std::string> LocalArgs(const BenchConfig& c,
                                   const std::string& dir) {
  const int total_steps = c.warmup_steps + c.steps;
  // One epoch longer than the run, so no epoch end (evaluation,
  // checkpoint) falls inside the measured window.
  const int64_t samples = static_cast<int64_t>(c.batch) * (total_steps + 4);
  std::string dataset =
      c.dataset.empty() ? absl::StrCat("synthetic:", samples) : c.dataset;
  if (!c.worker_command.empty()) dataset = absl::StrCat("external:", samples);
  std::vector<std::string> args = {
      ExecutableDir() + "/ferry",
      "local",
      "--mode",
      c.mode == "ring-full" || c.mode == "ring-sharded" ? "ring"
      : c.mode == "ps-colocated"                        ? "ps"
                                                        : c.mode,
      "--workers",
      std::to_string(c.workers),
      "--model",
      c.mlp_spec,
      "--dataset",
      dataset,
      "--batch",
      std::to_string(c.batch),
      "--epochs",
      "1",
      "--max-steps",
      std::to_string(total_steps),
      "--compression",
      c.compression,
      "--metrics-jsonl",
      dir + "/metrics.jsonl",
      "--summary-json",
      dir + "/summary.json",
      "--log-dir",
      dir + "/logs",
      "--lr",
      kLabLr,
      "--warmup-steps",
      "0"};
  if (!c.worker_command.empty()) {
    // The script's optimizer is the job's: SGD with momentum 0.9 (ferry's
    // default), no Nesterov, no weight decay, a constant rate of {lr}.
    args.insert(args.end(),
                {"--worker-command",
                 absl::StrReplaceAll(c.worker_command,
                                     {{"{samples}", std::to_string(samples)},
                                      {"{lr}", kLabLr}}),
                 "--nesterov", "false", "--weight-decay", "0", "--lr-schedule",
                 "constant", "--export", ExportDir(dir)});
  }
  if (c.mode == "ps-colocated") args.push_back("--colocated-shards");
  if (c.mode == "ring-sharded") {
    args.insert(args.end(), {"--ring-shard-optimizer-state", "true"});
  }
  if (ModeHasShards(c.mode)) {
    args.insert(args.end(),
                {"--shards", std::to_string(c.shards), "--partitions",
                 std::to_string(c.partitions), "--consistency", c.consistency,
                 "--checkpoint-every", "0"});
  }
  if (c.full_table_rows > 0) {
    args.insert(args.end(),
                {"--ring-full-table-rows", std::to_string(c.full_table_rows)});
  }
  if (c.bandwidth != "0")
    args.insert(args.end(), {"--link-bandwidth", c.bandwidth});
  if (c.latency != "0") args.insert(args.end(), {"--link-latency", c.latency});
  return args;
}

absl::StatusOr<int> RunChild(const std::vector<std::string>& argv,
                             const std::string& log, double timeout_s) {
  ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(argv, log));
  const absl::Time deadline = absl::Now() + absl::Seconds(timeout_s);
  while (true) {
    if (std::optional<int> code = child.Poll(); code.has_value()) return *code;
    if (absl::Now() > deadline) {
      child.Stop(absl::Seconds(5));
      return absl::DeadlineExceededError(
          absl::StrCat("did not finish within ", timeout_s, " s; see ", log));
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

// A DLRM run's prediction: the sparse cost model's mode for it, from the
// run's measured unique ids (the data's vocabularies: `ferry data ctr`'s
// defaults, or the full tables' rows), as a CostPrediction.
absl::StatusOr<CostPrediction> PredictSparse(const BenchConfig& c,
                                             double compute_seconds,
                                             double overhead_seconds,
                                             double unique_ids) {
  CostFlags f;
  f.model = c.mlp_spec;
  f.workers = c.workers;
  f.shards = std::max(1, c.shards);
  f.batch = c.batch;
  f.bandwidth = c.bandwidth;
  f.latency = c.latency;
  f.compute = absl::StrFormat("%.9fs", compute_seconds);
  f.overhead = absl::StrFormat("%.9fs", std::max(0.0, overhead_seconds));
  f.unique_ids = unique_ids;
  if (c.full_table_rows > 0) {
    // Tables of full_table_rows rows: the vocabulary plus the empty id.
    ASSIGN_OR_RETURN(const DlrmSpec spec, ResolveDlrmSpec(c.mlp_spec));
    std::vector<std::string> vocab(spec.num_fields,
                                   std::to_string(c.full_table_rows - 1));
    f.vocab_sizes = absl::StrJoin(vocab, ",");
  }
  ASSIGN_OR_RETURN(const SparseCostInput in, SparseCostInputFromFlags(f));
  ASSIGN_OR_RETURN(const SparsePrediction sparse, PredictSparseStep(in));
  const SparseMode mode = c.mode == "ps"          ? SparseMode::kPs
                          : c.mode == "hybrid"    ? SparseMode::kHybrid
                          : c.full_table_rows > 0 ? SparseMode::kAllReduce
                                                  : SparseMode::kAllGather;
  const SparseModeCost& m = sparse.mode(mode);
  CostPrediction p;
  p.mode = c.mode == "ps" ? CostMode::kPs : CostMode::kRing;
  p.params = sparse.dense_params;
  p.worker.sent = std::llround(m.sent());
  p.worker.received = std::llround(m.received());
  p.comm_seconds = m.dense_seconds + m.sparse_seconds + m.update_seconds;
  p.exposed_comm_seconds = m.step_seconds - in.compute_seconds;
  p.step_seconds = m.step_seconds;
  p.overhead_seconds = in.overhead_seconds;
  p.bottleneck = SparseModeName(mode);
  return p;
}

// `model`: the model's spec, or for a script's model its export.
absl::StatusOr<CostPrediction> Predict(const BenchConfig& c,
                                       const std::string& model,
                                       double compute_seconds,
                                       double overhead_seconds) {
  CostInput in;
  in.mode = IsPsMode(c.mode) ? CostMode::kPs : CostMode::kRing;
  in.colocated = c.mode == "ps-colocated";
  in.shard_optimizer_state = c.mode == "ring-sharded";
  in.workers = c.workers;
  in.shards = std::max(1, c.shards);
  in.partitions = c.partitions;
  ASSIGN_OR_RETURN(in.tensor_sizes, ModelTensorSizes(model));
  ASSIGN_OR_RETURN(in.bandwidth_bytes_per_second, ParseBandwidth(c.bandwidth));
  ASSIGN_OR_RETURN(const absl::Duration latency, ParseLatency(c.latency));
  in.latency_seconds = absl::ToDoubleSeconds(latency);
  ASSIGN_OR_RETURN(in.compression,
                   ParseCompression(c.compression, /*error_feedback=*/true));
  in.compute_seconds = compute_seconds;
  in.overhead_seconds = overhead_seconds;
  return PredictStep(in);
}

// Runs one configuration and returns its record. `overhead`: the cost
// model's overhead term, calibrated by the run's baseline (nullopt: none).
absl::StatusOr<nlohmann::json> RunOne(const BenchConfig& c,
                                      const std::string& dir, double timeout_s,
                                      std::optional<double> overhead) {
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  std::filesystem::create_directories(dir, ignored);
  const std::vector<std::string> argv = LocalArgs(c, dir);
  RETURN_IF_ERROR(
      WriteFile(dir + "/command.txt", absl::StrJoin(argv, " ") + "\n"));
  ASSIGN_OR_RETURN(const int code,
                   RunChild(argv, dir + "/ferry-local.log", timeout_s));
  if (code != 0) {
    return absl::InternalError(absl::StrCat("ferry local exited with ", code,
                                            "; see ", dir, "/ferry-local.log"));
  }
  ASSIGN_OR_RETURN(const std::vector<nlohmann::json> lines,
                   ReadJsonLines(dir + "/metrics.jsonl"));
  ASSIGN_OR_RETURN(const nlohmann::json summary,
                   ReadJson(dir + "/summary.json"));
  ASSIGN_OR_RETURN(const BenchMeasurement m,
                   MeasureRun(lines, summary, c.workers, c.warmup_steps));
  ASSIGN_OR_RETURN(
      const CostPrediction p,
      c.dlrm
          ? PredictSparse(c, m.compute_seconds, overhead.value_or(0),
                          m.unique_ids_per_step)
          : Predict(c, c.worker_command.empty() ? c.mlp_spec : ExportDir(dir),
                    m.compute_seconds, overhead.value_or(0)));
  nlohmann::json record = RunRecord(c, m, p);
  if (!IsBaseline(c) && !overhead.has_value()) {
    record["notes"].push_back(
        "its loopback baseline failed: predicted without the overhead term");
  }
  return record;
}

std::string Describe(const BenchConfig& c) {
  std::string text = absl::StrFormat("%s %s W=%d", c.mode, c.model, c.workers);
  if (ModeHasShards(c.mode))
    absl::StrAppend(&text, " S=", c.shards,
                    c.partitions > 1 ? absl::StrCat("x", c.partitions) : "",
                    " ", c.consistency);
  if (c.full_table_rows > 0) absl::StrAppend(&text, " N=", c.full_table_rows);
  absl::StrAppend(&text, " ", c.compression, " link ",
                  c.bandwidth == "0" ? "none" : c.bandwidth);
  return text;
}

void Plot(const BenchCompareFlags& f, const std::string& out_dir,
          ProgressPrinter& progress) {
  const std::string script =
      f.plot_script.empty()
          ? std::string(FERRY_SOURCE_DIR) + "/bench/plot_compare.py"
          : f.plot_script;
  if (access(script.c_str(), R_OK) != 0) {
    progress.Line(
        absl::StrCat("plots skipped: ", script, " not found (--plot-script)"));
    return;
  }
  auto code =
      RunChild({"/usr/bin/python3", script, out_dir + "/results.json", out_dir},
               out_dir + "/plot.log", 120);
  if (!code.ok() || *code != 0) {
    progress.Line(absl::StrCat(
        "plots failed (python3 with matplotlib: scripts/setup installs "
        "python3-matplotlib); see ",
        out_dir, "/plot.log"));
    return;
  }
  progress.Line(absl::StrCat("plots: ", out_dir, "/*.svg"));
}

}  // namespace

void AddBenchCompareFlags(CLI::App& cmd, BenchCompareFlags& f) {
  std::string presets;
  for (const ModelPreset& p : ModelPresets()) presets += " " + p.name;
  cmd.add_option("--models", f.models,
                 "presets (" + presets.substr(1) +
                     " mlp convnet), ferry.model.v1 JSON files or MLP specs")
      ->delimiter(',')
      ->capture_default_str();
  cmd.add_option("--modes", f.modes,
                 "ps, ps-colocated (ps with --colocated-shards: a shard "
                 "process in every worker, --shards ignored), ring, "
                 "ring-sharded (ring with --ring-shard-optimizer-state); a "
                 "DLRM "
                 "(--models dlrm) also hybrid and ring-full (ring with "
                 "--ring-full-table-rows)")
      ->delimiter(',')
      ->capture_default_str();
  cmd.add_option("--workers", f.workers, "worker counts")
      ->delimiter(',')
      ->capture_default_str();
  cmd.add_option("--shards", f.shards, "PS shard counts")
      ->delimiter(',')
      ->capture_default_str();
  cmd.add_option("--partitions", f.partitions,
                 "PS: logical shards per shard process (ferry local "
                 "--partitions)")
      ->delimiter(',')
      ->capture_default_str();
  cmd.add_option("--consistency", f.consistency, "PS: sync, async, ssp:K")
      ->delimiter(',')
      ->capture_default_str();
  cmd.add_option("--compression", f.compression, "none, fp16, bf16, topk:R")
      ->delimiter(',')
      ->capture_default_str();
  cmd.add_option("--bandwidth", f.bandwidths,
                 "emulated links per process and direction: 1Gbit, 10Gbit, "
                 "25Gbit, 0 (none)")
      ->delimiter(',')
      ->capture_default_str();
  cmd.add_option("--latency", f.latencies,
                 "emulated latency per message: 50us, 1ms, 0")
      ->delimiter(',')
      ->capture_default_str();
  cmd.add_option("--batch", f.batch, "global batch")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--warmup-steps", f.warmup_steps,
                 "steps before the measured window")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--steps", f.steps, "measured steps per run")
      ->capture_default_str()
      ->check(CLI::Range(2, 100000));
  cmd.add_flag("--quick", f.quick,
               "a small sweep of both modes (fashion-mlp, W=2, S=1,2, "
               "none/fp16, 1Gbit 50us, "
               "5+50 steps; 12 runs with the loopback baselines, about 1.5 "
               "min); overrides the "
               "sweep flags");
  cmd.add_option("--dataset", f.dataset,
                 "dense models' data: auto (fashion-mnist when the model "
                 "takes its images, else synthetic), fashion-mnist, "
                 "synthetic")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "fashion-mnist", "synthetic"}));
  cmd.add_flag("--strict", f.strict,
               "exit 1 when a row breaks a physical check (marked INVALID: "
               "exposed comm or compute longer than the step, faster than "
               "its link, samples/s x window not the samples applied)");
  cmd.add_option("--out", f.out_dir,
                 "output directory (results.json/.csv/.md, plots, runs/)")
      ->required();
  cmd.add_option("--ctr-data", f.ctr_data,
                 "DLRM runs: a `ferry data ctr` directory (default: one "
                 "generated into OUT/ctr-data)");
  cmd.add_option("--full-table-rows", f.full_table_rows,
                 "DLRM ring-full runs: rows of every table")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 26));
  cmd.add_option("--plot-script", f.plot_script,
                 "default: bench/plot_compare.py of the source");
  cmd.add_option("--run-timeout", f.run_timeout_s, "seconds per run")
      ->capture_default_str();
  cmd.add_option("--worker-command", f.worker_command,
                 "a ferry.torch script as every run's worker (its model is "
                 "the job's, docs/pytorch.md); {samples} becomes the run's "
                 "dataset size, {lr} its learning rate (SGD, momentum 0.9, "
                 "no Nesterov or weight decay); replaces --models");
  cmd.add_option("--model-name", f.model_name,
                 "the script's model in the results (with --worker-command)")
      ->capture_default_str();
}

int RunBenchCompare(const BenchCompareFlags& flags) {
  // Every run's ring travels the stream, as an emulated link's does, so
  // that the loopback baseline calibrates the same stack (ring neighbours
  // on one host would use shared-memory links otherwise). The workers read
  // it as their --ring-shared-memory; set it to true to measure the links.
  setenv("FERRY_RING_SHARED_MEMORY", "false", /*overwrite=*/0);
  auto expanded = ExpandSweep(flags);
  if (!expanded.ok()) {
    std::fprintf(stderr, "ferry bench compare: %s\n",
                 std::string(expanded.status().message()).c_str());
    return 2;
  }
  const std::vector<BenchConfig> runs_to_do = WithBaselines(*expanded);
  // DLRM runs without --ctr-data: CTR data one epoch longer than a run.
  const std::string ctr_dir = CtrDataDir(flags);
  const bool needs_data =
      flags.ctr_data.empty() &&
      std::any_of(runs_to_do.begin(), runs_to_do.end(),
                  [](const BenchConfig& c) { return c.dlrm; }) &&
      !std::filesystem::exists(ctr_dir + "/meta.json");
  if (needs_data) {
    const BenchCompareFlags f = flags.quick ? QuickPreset(flags) : flags;
    const int64_t rows =
        static_cast<int64_t>(f.batch) * (f.warmup_steps + f.steps + 4);
    std::filesystem::create_directories(flags.out_dir);
    auto code = RunChild(
        {ExecutableDir() + "/ferry", "data", "ctr", "--out", ctr_dir, "--rows",
         std::to_string(rows), "--test-rows", "2000", "--seed", "1", "--quiet"},
        flags.out_dir + "/ctr-data.log", flags.run_timeout_s);
    if (!code.ok() || *code != 0) {
      std::fprintf(stderr,
                   "ferry bench compare: ferry data ctr failed; see %s\n",
                   (flags.out_dir + "/ctr-data.log").c_str());
      return 1;
    }
  }
  const std::vector<BenchConfig>* sweep = &runs_to_do;
  std::map<std::string, double>
      baseline_comm;  // baseline name -> exposed comm s
  const std::string out = flags.out_dir;
  std::error_code error;
  std::filesystem::create_directories(out + "/runs", error);
  if (error) {
    std::fprintf(stderr, "ferry bench compare: cannot create %s: %s\n",
                 out.c_str(), error.message().c_str());
    return 2;
  }
  ProgressPrinter progress(stderr);
  progress.Line(absl::StrFormat("%d runs, results in %s", sweep->size(), out));
  std::vector<nlohmann::json> runs;
  std::vector<std::string> invalid_rows;
  nlohmann::json failures = nlohmann::json::array();
  const absl::Time start = absl::Now();
  for (size_t i = 0; i < sweep->size(); ++i) {
    const BenchConfig& c = (*sweep)[i];
    progress.Update(
        static_cast<double>(i) / sweep->size(),
        absl::StrFormat("[%d/%d] %s", i + 1, sweep->size(), Describe(c)));
    const absl::Time run_start = absl::Now();
    std::optional<double> overhead;
    if (!IsBaseline(c)) {
      const auto it = baseline_comm.find(BaselineOf(c).Name());
      if (it != baseline_comm.end()) overhead = it->second;
    }
    auto record = RunOne(c, absl::StrCat(out, "/runs/", c.Name()),
                         flags.run_timeout_s, overhead);
    const double seconds = absl::ToDoubleSeconds(absl::Now() - run_start);
    if (!record.ok()) {
      progress.Line(absl::StrFormat("[%d/%d] %s: FAILED (%s)", i + 1,
                                    sweep->size(), Describe(c),
                                    record.status().message()));
      failures.push_back({{"name", c.Name()},
                          {"error", std::string(record.status().message())}});
      continue;
    }
    const nlohmann::json& step_predicted = (*record)["step_seconds_predicted"];
    if (!IsValidRow(*record)) {
      for (const auto& reason : (*record)["invalid"]) {
        progress.Line(absl::StrFormat("[%d/%d] %s: INVALID: %s", i + 1,
                                      sweep->size(), Describe(c),
                                      reason.get<std::string>()));
      }
      invalid_rows.push_back(c.Name());
    }
    progress.Line(absl::StrFormat(
        "[%d/%d] %s: step %.4f s (model %s), %.0f samples/s, %.3f "
        "MB/worker/step (model %.3f)  [%.0f s]",
        i + 1, sweep->size(), Describe(c),
        (*record)["step_seconds_measured"].get<double>(),
        step_predicted.is_null()
            ? std::string("n/a: loopback baseline")
            : absl::StrFormat("%.4f", step_predicted.get<double>()),
        (*record)["samples_per_second"].get<double>(),
        (*record)["bytes_per_step_per_worker_measured"].get<double>() / 1e6,
        (*record)["bytes_per_step_per_worker_predicted"].get<double>() / 1e6,
        seconds));
    if (IsBaseline(c))
      baseline_comm[c.Name()] =
          (*record)["comm_seconds_measured"].get<double>();
    runs.push_back(*std::move(record));
  }
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  const nlohmann::json results = {
      {"generated_unix_seconds", absl::ToUnixSeconds(absl::Now())},
      {"host", host},
      {"cores", static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))},
      {"sweep_seconds", absl::ToDoubleSeconds(absl::Now() - start)},
      {"runs", runs},
      {"invalid_rows", invalid_rows},
      {"failures", failures}};
  for (const auto& [name, text] :
       std::vector<std::pair<std::string, std::string>>{
           {"results.json", results.dump(2) + "\n"},
           {"results.csv", ResultsCsv(runs)},
           {"results.md", ResultsMarkdown(runs)}}) {
    if (absl::Status s = WriteFile(out + "/" + name, text); !s.ok()) {
      std::fprintf(stderr, "ferry bench compare: %s\n",
                   std::string(s.message()).c_str());
      return 1;
    }
  }
  if (!runs.empty()) Plot(flags, out, progress);
  progress.Line(absl::StrFormat(
      "%d of %d runs measured in %.0f s, %d INVALID; %s/results.md",
      runs.size(), sweep->size(), absl::ToDoubleSeconds(absl::Now() - start),
      invalid_rows.size(), out));
  if (flags.strict && !invalid_rows.empty()) {
    std::fprintf(
        stderr, "ferry bench compare: --strict: %zu row(s) INVALID: %s\n",
        invalid_rows.size(), absl::StrJoin(invalid_rows, ", ").c_str());
    return 1;
  }
  return failures.empty() ? 0 : 1;
}

}  // namespace ferry

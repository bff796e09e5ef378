// `ferry bench compare`: runs a sweep of `ferry local` jobs (model, mode,
// workers, shards, consistency, compression, emulated link), measures each
// over its steady-state steps, sets the cost model's prediction beside it
// and writes results.json, results.csv, results.md and plots to --out.
//
// Every run is a real job of separate processes on loopback with synthetic
// data (the model's shape, a seeded random dataset), so compute is real
// and the bytes are the ones the processes counted.
#ifndef FERRY_CLIENT_BENCH_COMPARE_H_
#define FERRY_CLIENT_BENCH_COMPARE_H_

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "client/bench_results.h"

namespace ferry {

struct BenchCompareFlags {
  std::vector<std::string> models = {"fashion-mlp"};
  std::vector<std::string> modes = {"ps", "ring"};
  std::vector<int> workers = {2};
  std::vector<int> shards = {1, 2};
  std::vector<int> partitions = {1};  // PS: logical shards per process
  std::vector<std::string> consistency = {"sync"};
  std::vector<std::string> compression = {"none"};
  std::vector<std::string> bandwidths = {"1Gbit"};
  std::vector<std::string> latencies = {"50us"};
  int batch = 64;
  int warmup_steps = 3;
  int steps = 20;
  bool quick = false;
  // Dense models' data: "auto" (fashion-mnist for a model that takes its
  // images, synthetic otherwise), "fashion-mnist" or "synthetic".
  std::string dataset = "auto";
  // Fail (exit 1) when a row breaks a physical check (INVALID).
  bool strict = false;
  std::string out_dir;
  std::string plot_script;  // default: bench/plot_compare.py of the source tree
  // DLRM models: the CTR data (`ferry data ctr` output; empty: generated
  // into OUT/ctr-data, one epoch longer than a run) and the rows of each
  // table in "ring-full" runs.
  std::string ctr_data;
  int64_t full_table_rows = 10000;
  double run_timeout_s = 600;
  // A ferry.torch script as every run's worker (its model is the job's:
  // ferry local --model external); {samples} in it becomes the run's
  // dataset size and {lr} its learning rate. The sweep then has this one
  // model, named model_name, in ps and ring mode.
  std::string worker_command;
  std::string model_name = "torch";
};

// Adds the subcommand's flags to `cmd`.
void AddBenchCompareFlags(CLI::App& cmd, BenchCompareFlags& flags);

// The sweep as a list of runs: every combination, ring runs once per
// worker count (no shards, sync only), invalid combinations skipped.
// INVALID_ARGUMENT for an unknown model, mode, compression or link text, or
// a worker command without {samples} (its dataset must be the run's size).
absl::StatusOr<std::vector<BenchConfig>> ExpandSweep(
    const BenchCompareFlags& flags);

// The sweep with, before each run on an emulated link, its loopback
// baseline (the same run without link limits) unless the sweep has it
// already: the baseline's exposed communication calibrates the cost
// model's overhead term (CostInput::overhead_seconds) for that run.
std::vector<BenchConfig> WithBaselines(const std::vector<BenchConfig>& sweep);
bool IsBaseline(const BenchConfig& config);
BenchConfig BaselineOf(const BenchConfig& config);

// Where DLRM runs read their CTR data: --ctr-data, or OUT/ctr-data
// (absolute: ferry local's coordinator resolves it).
std::string CtrDataDir(const BenchCompareFlags& f);
// --quick: the flags with a small sweep of both modes over one MLP.
BenchCompareFlags QuickPreset(BenchCompareFlags f);

// The modes a model takes: ps and ring; a dense model (ferry's own or a
// script's) also ps-colocated and ring-sharded; a DLRM also hybrid and
// ring-full.
bool ModeFitsModel(const std::string& mode, bool dlrm);

// Runs the sweep; returns the exit code (0 all runs measured, 1 some run
// failed, or with --strict a row is INVALID: the others are still
// reported, 2 bad flags).
int RunBenchCompare(const BenchCompareFlags& flags);

}  // namespace ferry

#endif  // FERRY_CLIENT_BENCH_COMPARE_H_

// Results of `ferry bench compare`: one measured run of `ferry local` next
// to the cost model's prediction for it, and the report files built from a
// list of them (results.json, results.csv, results.md).
//
// Pure functions over parsed JSON, no process or file handling except the
// writers.
#ifndef FERRY_CLIENT_BENCH_RESULTS_H_
#define FERRY_CLIENT_BENCH_RESULTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/cost_model.h"
#include "nlohmann/json.hpp"

namespace ferry {

// Whether a sweep's mode runs a parameter server ("ps", "ps-colocated").
bool IsPsMode(const std::string& mode);
// Whether its runs have shards: the PS modes and "hybrid".
bool ModeHasShards(const std::string& mode);

// One point of a sweep.
struct BenchConfig {
  std::string model;     // preset name or MLP spec, as given
  std::string mlp_spec;  // resolved (a DLRM: the model as given)
  // "ps", "ps-colocated" (ps with --colocated-shards: one shard process in
  // each worker, shards == workers), "ring" or "ring-sharded" (ring with
  // --ring-shard-optimizer-state); a DLRM also "hybrid" and
  // "ring-full" (ring mode with --ring-full-table-rows full_table_rows:
  // DDP's full-table all-reduce).
  std::string mode;
  bool dlrm = false;
  // What the run trains on: a DLRM's "criteo:DIR", "fashion-mnist", or
  // empty: synthetic data of the model's shape (ferry local's synthetic:N).
  std::string dataset;
  int64_t full_table_rows = 0;  // "ring-full"
  int workers = 2;
  int shards = 0;      // 0 for ring
  int partitions = 1;  // PS: logical shards per shard process
  std::string consistency = "sync";
  std::string compression = "none";
  std::string bandwidth = "0";  // ferry local --link-bandwidth ("0": none)
  std::string latency = "0";    // ferry local --link-latency
  int batch = 64;               // global batch
  int warmup_steps = 3;
  int steps = 20;  // measured steps after the warm-up
  // A ferry.torch script as the worker (mlp_spec "external"), with
  // {samples} and {lr} still in it; empty: ferry's own worker.
  std::string worker_command;
  std::string Name() const;  // a file-name-safe id
};

// What a run measured over its steady-state window: the steps from the
// first metrics line at step >= warmup_steps to the last line, timed by
// the workers' clocks (the lines' ended_seconds; common/throughput_window.h
// defines the window), never by when the coordinator recorded them.
// Data-plane bytes only (workers to/from shards, or ring peers); control
// traffic is separate.
struct BenchMeasurement {
  int64_t steps = 0;          // steps (async: tasks) inside the window
  double step_seconds = 0;    // window_seconds / steps
  double window_seconds = 0;  // the first step's end to the last one's
  double work_seconds = 0;    // WindowFigures::work_seconds
  int64_t window_samples = 0;
  double samples_per_second = 0;  // window_samples / window_seconds
  // Summed over the window's worker reports (worker-seconds).
  double compute_worker_seconds = 0;
  double comm_worker_seconds = 0;
  double bytes_sent_per_worker = 0;      // per step
  double bytes_received_per_worker = 0;  // per step
  double compute_seconds = 0;            // per step per worker
  double comm_seconds = 0;               // exposed, per step per worker
  double control_bytes_per_worker = 0;   // per step, to/from the coordinator
  std::vector<double> shard_bytes;       // per step, per shard, both ways
  // Per step, per shard: what the workers sent it (its downlink) and what
  // it sent them (its uplink).
  std::vector<double> shard_bytes_in, shard_bytes_out;
  std::vector<double> shard_requests;  // per step, per shard (pushes + pulls)
  double test_accuracy = 0;
  double final_loss = 0;
  double unique_ids_per_step = 0;  // a DLRM's, summed over the workers
  // The largest peak resident memory of a worker process (ferry local's
  // worker_peak_rss_mib; 0 when the summary has none).
  double worker_peak_rss_mib = 0;
};

// Reads the coordinator's metrics lines (--metrics-jsonl) and the job
// summary (--summary-json). Step lines need step, ended_seconds (the step's
// end on the workers' clocks; began_seconds, its beginning, when there),
// samples, workers (its contributors), the
// step's mean compute_seconds and comm_seconds, and the cumulative
// "data_bytes" and "control_bytes" {sent, received} over all workers, and
// (PS) "peer_bytes" {"ps<i>": {sent, received}} and "shard_requests".
// FAILED_PRECONDITION when fewer than 2 lines fall in the window (the run
// was too short), naming the counts, or when the lines carry no
// ended_seconds (written by a ferry older than the step clocks).
absl::StatusOr<BenchMeasurement> MeasureRun(
    const std::vector<nlohmann::json>& metrics_lines,
    const nlohmann::json& summary, int workers, int warmup_steps);

// A run as written to results.json: the config, the measurement, the
// prediction and the relative errors, with the notes that explain the
// differences the report flags (bytes beyond 2%, time beyond 15%), and
// "invalid": the physical checks it breaks (client/measurement_checks.h;
// empty: valid). An invalid row is marked INVALID in results.md and left
// out of every fit and error summary.
nlohmann::json RunRecord(const BenchConfig& config,
                         const BenchMeasurement& measured,
                         const CostPrediction& predicted);

// False when the record broke a physical check (its "invalid" reasons).
bool IsValidRow(const nlohmann::json& run);

// results.csv and results.md from the run records.
std::string ResultsCsv(const std::vector<nlohmann::json>& runs);
std::string ResultsMarkdown(const std::vector<nlohmann::json>& runs);

}  // namespace ferry

#endif  // FERRY_CLIENT_BENCH_RESULTS_H_

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

// One point of a sweep.
struct BenchConfig {
  std::string model;     // preset name or MLP spec, as given
  std::string mlp_spec;  // resolved (a DLRM: the model as given)
  // "ps" or "ring"; a DLRM also "hybrid" and "ring-full" (ring mode with
  // --ring-full-table-rows full_table_rows: DDP's full-table all-reduce).
  std::string mode;
  bool dlrm = false;
  std::string dataset;          // a DLRM's "criteo:DIR"; empty: synthetic
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
  int steps = 20;            // measured steps after the warm-up
  std::string Name() const;  // a file-name-safe id
};

// What a run measured over its steady-state window: from the first metrics
// line at step >= warmup_steps to the last line. Data-plane bytes only
// (workers to/from shards, or ring peers); control traffic is separate.
struct BenchMeasurement {
  int64_t steps = 0;
  double step_seconds = 0;
  double bytes_sent_per_worker = 0;      // per step
  double bytes_received_per_worker = 0;  // per step
  double compute_seconds = 0;            // per step per worker
  double comm_seconds = 0;               // exposed, per step per worker
  double control_bytes_per_worker = 0;   // per step, to/from the coordinator
  std::vector<double> shard_bytes;       // per step, per shard, both ways
  std::vector<double> shard_requests;    // per step, per shard (pushes + pulls)
  double test_accuracy = 0;
  double final_loss = 0;
  double unique_ids_per_step = 0;  // a DLRM's, summed over the workers
};

// Reads the coordinator's metrics lines (--metrics-jsonl) and the job
// summary (--summary-json). Step lines need step, elapsed_seconds, the
// step's mean compute_seconds and comm_seconds, and the cumulative
// "data_bytes" and "control_bytes" {sent, received} over all workers, and
// (PS) "peer_bytes" {"ps<i>": {sent, received}} and "shard_requests".
// FAILED_PRECONDITION when fewer than 2 lines fall in the window (the run
// was too short), naming the counts.
absl::StatusOr<BenchMeasurement> MeasureRun(
    const std::vector<nlohmann::json>& metrics_lines,
    const nlohmann::json& summary, int workers, int warmup_steps);

// A run as written to results.json: the config, the measurement, the
// prediction and the relative errors, with the notes that explain the
// differences the report flags (bytes beyond 2%, time beyond 15%).
nlohmann::json RunRecord(const BenchConfig& config,
                         const BenchMeasurement& measured,
                         const CostPrediction& predicted);

// results.csv and results.md from the run records.
std::string ResultsCsv(const std::vector<nlohmann::json>& runs);
std::string ResultsMarkdown(const std::vector<nlohmann::json>& runs);

}  // namespace ferry

#endif  // FERRY_CLIENT_BENCH_RESULTS_H_

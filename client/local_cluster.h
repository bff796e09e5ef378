// `ferry local`: a whole job on this machine as separate processes on
// loopback (coordinator, S PS shards, W workers), with live progress, a
// cluster file for outside scripts, a JSON summary, and a clean stop on
// Ctrl-C (SIGINT/SIGTERM must be blocked by main; see shutdown_signal.h).
//
// Supervision (process_supervisor.h, supervision.h): a shard or the
// coordinator that dies is started again with the same command line (same
// port and shard id; `--checkpoint-dir <log_dir>/ps<i>`, `--state-dir
// <log_dir>/coordinator`) after `restart_delay_s`, like a StatefulSet;
// deaths not caused by the chaos plan count against `max_restarts`. Workers
// are never restarted; the job fails when none is left, none is to join and
// the job has not finished within `no_worker_grace_s`. A chaos plan
// (chaos_plan.h) kills, stops or adds processes at times from launch.
#ifndef FERRY_CLIENT_LOCAL_CLUSTER_H_
#define FERRY_CLIENT_LOCAL_CLUSTER_H_

#include <string>
#include <vector>

#include "client/chaos_plan.h"
#include "nlohmann/json.hpp"

namespace ferry {

struct LocalClusterOptions {
  std::string mode = "ps";
  int workers = 2;
  int shards = 2;      // shard processes
  int partitions = 1;  // logical shards per process (--partitions)
  // PS mode: shard process i runs inside worker i's process
  // (ferry-worker --host-shard i), named psI and supervised as a shard;
  // the other workers - shards workers are plain. REQUIRES shards <= workers.
  bool colocated_shards = false;
  std::string device = "auto";
  // Non-empty: each worker is this shell command (`/bin/sh -c`) instead of
  // ferry-worker, e.g. a PyTorch script using ferry.torch: it finds the
  // coordinator in FERRY_COORDINATOR and the ferry package on PYTHONPATH
  // (the build's python/ folder first). It gets no ops ports and no link
  // emulation flags.
  std::string worker_command;
  std::string summary_json;
  std::string cluster_file;
  std::string log_dir;  // empty: a new directory under /tmp
  double timeout_s = 3600;
  // Flags passed through to the coordinator verbatim (job and optimizer).
  std::vector<std::string> job_args;
  // Appended to every worker's and every shard's command line, those
  // started later (chaos joins, restarts) included: link emulation flags.
  std::vector<std::string> link_args;
  // Logging and security flags given to every process (OpsFlags::ToArgs).
  std::vector<std::string> ops_args;
  // Scripted churn, sorted by time (ParseChaosPlan); checked against the
  // cluster (ValidateChaosPlan) before anything starts.
  std::vector<ChaosEvent> chaos;
  double restart_delay_s = 1.0;
  int max_restarts = 5;  // per shard/coordinator, deaths not from chaos
  double no_worker_grace_s = 15.0;
  // Shown in the summary.
  std::string consistency = "sync";
  int epochs = 0;
  int global_batch = 0;
};

// Runs the job to its end. Returns the exit code: 0 when the job finished,
// 1 on a failure (a shard or the coordinator out of restarts, no workers
// left, the coordinator's status reports an error, timeout), 2
// (kExitConfig) for a chaos plan that does not fit the cluster or a process
// that refused its configuration (printed at once with its log's last
// lines, never restarted), 130 when interrupted. Writes the
// summary (when asked) on success, with `chaos_events`, `restarts` and
// `workers_started` added to BuildSummary's keys.
int RunLocalCluster(const LocalClusterOptions& options);

// The summary of a finished job from the coordinator's status (its JSON
// form, proto field names) and the shards' ShardInfo (JSON): the job's
// shape, steps, speed (`samples_per_second` over the throughput window of
// common/throughput_window.h, with `startup_seconds`, `eval_seconds`,
// `window_seconds`, `window_work_seconds`, `window_samples`,
// `window_steps`, `step_seconds` and the window's compute and comm per
// worker step), `invalid` (the physical checks of
// client/measurement_checks.h it breaks; empty: none), accuracy, bytes by
// role/peer/shard, `workers_seen`,
// `epochs_accounting: [{epoch, samples_applied, samples_released,
// samples_dropped}]`, `evals`, the coordinator's job `events: [{unix_seconds,
// kind, worker_id, step, samples_lost, detail}]`, `aborted_steps`,
// `rollbacks`, `checkpoint_version` (-1: none) and `coordinator_restarts`
// (times it resumed from its state); for a CTR (DLRM) job `test_auc` and
// `test_logloss` (the last evaluation's; `test_accuracy` is then the fraction
// right at a 0.5 threshold), also in each of `evals`. Missing status fields
// read as 0.
// Exposed for tests.
nlohmann::json BuildSummary(const LocalClusterOptions& options,
                            const std::string& status_json,
                            const std::vector<std::string>& shard_info_json);

}  // namespace ferry

#endif  // FERRY_CLIENT_LOCAL_CLUSTER_H_

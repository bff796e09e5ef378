// `ferry local`: a whole job on this machine as separate processes on
// loopback (coordinator, S PS shards, W workers), with live progress, a
// cluster file for outside scripts, a JSON summary, and a clean stop on
// Ctrl-C (SIGINT/SIGTERM must be blocked by main; see shutdown_signal.h).
#ifndef FERRY_CLIENT_LOCAL_CLUSTER_H_
#define FERRY_CLIENT_LOCAL_CLUSTER_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace ferry {

struct LocalClusterOptions {
  std::string mode = "ps";
  int workers = 2;
  int shards = 2;
  std::string device = "auto";
  std::string summary_json;
  std::string cluster_file;
  std::string log_dir;  // empty: a new directory under /tmp
  double timeout_s = 3600;
  // Flags passed through to the coordinator verbatim (job and optimizer).
  std::vector<std::string> job_args;
  // Shown in the summary.
  std::string consistency = "sync";
  int epochs = 0;
  int global_batch = 0;
};

// Runs the job to its end. Returns the exit code: 0 when the job finished,
// 1 on a failure (a process died, timeout), 130 when interrupted. Writes the
// summary (when asked) on success.
int RunLocalCluster(const LocalClusterOptions& options);

// The summary of a finished job from the coordinator's status and the
// shards' byte counts (exposed for tests).
nlohmann::json BuildSummary(const LocalClusterOptions& options,
                            const std::string& status_json,
                            const std::vector<std::string>& shard_info_json);

}  // namespace ferry

#endif  // FERRY_CLIENT_LOCAL_CLUSTER_H_

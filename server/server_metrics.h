// /metrics for the server roles: scrape hooks (common/prometheus_metrics.h)
// that copy a PS shard's or a coordinator's state into ferry's gauges right
// before every scrape, so the core classes stay free of prometheus. Counters
// and latency histograms are observed inline by the core classes.
//
// Wiring in a main (after the core object exists, before serving):
//   ASSIGN_OR_RETURN(auto exposer, StartMetricsExposer(ops.metrics_port));
//   auto gauges = ExportShardGauges(shard.get(), &checkpointer);
// and destroy `gauges` before the shard / checkpointer / coordinator.
//
// Thread safety: the hooks run on the exposer's threads; the objects they
// read are thread-safe.
#ifndef FERRY_SERVER_SERVER_METRICS_H_
#define FERRY_SERVER_SERVER_METRICS_H_

#include <memory>
#include <vector>

#include "common/prometheus_metrics.h"
#include "coordinator/coordinator.h"
#include "ps/ps_checkpointer.h"
#include "ps/ps_shard.h"

namespace ferry {

// One partition of a shard process (server/run_ps.cc): its shard and
// checkpointer (may be null), not owned.
struct ShardGaugeSource {
  PsShard* shard = nullptr;
  PsCheckpointer* checkpointer = nullptr;
};

// Sets, per scrape, over the process's partitions: ferry_model_version
// {role="ps"} (the lowest partition version: the version every partition
// has), ferry_pending_pulls (summed), ferry_generation{role="ps"} (the
// newest generation a partition has seen finalize or restore), with
// checkpointers ferry_checkpoint_age_seconds{role="ps"} (the oldest
// partition's; -1 while one has none), and for embedding tables the rows,
// bytes and events summed. The sources must outlive the returned hook.
std::unique_ptr<ScrapeHook> ExportShardGauges(
    std::vector<ShardGaugeSource> sources);
// The same for a process of one shard.
inline std::unique_ptr<ScrapeHook> ExportShardGauges(
    PsShard* shard, PsCheckpointer* checkpointer) {
  return ExportShardGauges({ShardGaugeSource{shard, checkpointer}});
}

// Sets, per scrape: ferry_members, ferry_generation{role="coordinator"},
// ferry_model_version{role="coordinator"} (steps applied; async: tasks),
// ferry_job_samples_applied, ferry_job_finished,
// ferry_checkpoint_age_seconds{role="coordinator"} (since the state was
// last written to --state-dir; -1 without one or before the first write)
// and adds the coordinator's own traffic (Coordinator::CountBytes) to
// ferry_bytes_total{role="coordinator"}. `coordinator` is not owned and
// must outlive the returned hook.
std::unique_ptr<ScrapeHook> ExportCoordinatorGauges(Coordinator* coordinator);

}  // namespace ferry

#endif  // FERRY_SERVER_SERVER_METRICS_H_

// /metrics of a PS shard process (or a worker hosting its shard): a scrape
// hook (common/prometheus_metrics.h) that copies the partitions' state into
// ferry's gauges right before every scrape, so the shard core stays free of
// prometheus.
//
// Thread safety: the hook runs on the exposer's threads; the objects it
// reads are thread-safe.
#ifndef FERRY_PS_SHARD_GAUGES_H_
#define FERRY_PS_SHARD_GAUGES_H_

#include <memory>
#include <vector>

#include "common/prometheus_metrics.h"
#include "ps/ps_checkpointer.h"
#include "ps/ps_shard.h"

namespace ferry {

// One partition of a shard process (ps/shard_host.h): its shard and
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

}  // namespace ferry

#endif  // FERRY_PS_SHARD_GAUGES_H_

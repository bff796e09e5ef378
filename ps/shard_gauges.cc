#include "ps/shard_gauges.h"

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <utility>

namespace ferry {
std::unique_ptr<ScrapeHook> ExportShardGauges(
    std::vector<ShardGaugeSource> sources) {
  // The stores count their events cumulatively; each scrape adds what grew
  // since the previous one (a count that went down, after a restore to an
  // older checkpoint, starts over from there).
  using Events = std::array<int64_t, kNumEmbeddingEvents>;
  auto last = std::make_shared<std::vector<Events>>(sources.size(), Events{});
  return RegisterScrapeHook([sources = std::move(sources), last] {
    FerryMetrics& m = Metrics();
    int64_t version = -1;
    int64_t pending_pulls = 0;
    int64_t generation = 0;
    double oldest_checkpoint = 0;
    bool with_checkpointer = false, never_checkpointed = false;
    bool sparse = false;
    int64_t rows = 0, pending_ids = 0, bytes = 0;
    for (size_t i = 0; i < sources.size(); ++i) {
      const PsShardInfo info = sources[i].shard->Info();
      version = version < 0 ? info.version : std::min(version, info.version);
      pending_pulls += info.pending_pulls;
      generation = std::max(generation, info.max_generation);
      if (sources[i].checkpointer != nullptr) {
        const double age =
            AgeSeconds(sources[i].checkpointer->last_checkpoint_time());
        with_checkpointer = true;
        // -1 (a partition without a checkpoint yet) stays -1.
        never_checkpointed |= age < 0;
        oldest_checkpoint = std::max(oldest_checkpoint, age);
      }
      if (!info.sparse.has_value()) continue;
      sparse = true;
      const SparseTableStats& t = info.sparse->total;
      rows += t.rows;
      pending_ids += t.pending_ids;
      bytes += info.sparse->bytes;
      const int64_t now[kNumEmbeddingEvents] = {
          t.rows_created, t.ids_admitted, t.updates_dropped, t.evicted_ttl,
          t.evicted_memory};
      Events& seen = (*last)[i];
      for (int e = 0; e < kNumEmbeddingEvents; ++e) {
        const int64_t grown = now[e] - seen[e];
        if (grown > 0) {
          m.embedding_events(static_cast<EmbeddingEvent>(e))
              .Increment(static_cast<double>(grown));
        }
        seen[e] = now[e];
      }
    }
    if (sparse) {
      m.embedding_rows(false).Set(static_cast<double>(rows));
      m.embedding_rows(true).Set(static_cast<double>(pending_ids));
      m.embedding_bytes().Set(static_cast<double>(bytes));
    }
    m.model_version(MetricRole::kPs).Set(static_cast<double>(version));
    m.pending_pulls().Set(static_cast<double>(pending_pulls));
    m.generation(MetricRole::kPs).Set(static_cast<double>(generation));
    if (with_checkpointer) {
      m.checkpoint_age_seconds(MetricRole::kPs)
          .Set(never_checkpointed ? -1 : oldest_checkpoint);
    }
  });
}

}  // namespace ferry

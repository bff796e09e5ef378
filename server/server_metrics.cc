#include "server/server_metrics.h"

#include <array>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace ferry {
namespace {

double AgeSeconds(const std::optional<absl::Time>& last) {
  if (!last.has_value()) return -1;
  return absl::ToDoubleSeconds(absl::Now() - *last);
}

}  // namespace

std::unique_ptr<ScrapeHook> ExportShardGauges(PsShard* shard,
                                              PsCheckpointer* checkpointer) {
  // The store counts its events cumulatively; each scrape adds what grew
  // since the previous one (a count that went down, after a restore to an
  // older checkpoint, starts over from there).
  auto last = std::make_shared<std::array<int64_t, kNumEmbeddingEvents>>();
  return RegisterScrapeHook([shard, checkpointer, last] {
    const PsShardInfo info = shard->Info();
    FerryMetrics& m = Metrics();
    if (info.sparse.has_value()) {
      const SparseTableStats& t = info.sparse->total;
      m.embedding_rows(false).Set(static_cast<double>(t.rows));
      m.embedding_rows(true).Set(static_cast<double>(t.pending_ids));
      m.embedding_bytes().Set(static_cast<double>(info.sparse->bytes));
      const int64_t now[kNumEmbeddingEvents] = {
          t.rows_created, t.ids_admitted, t.updates_dropped, t.evicted_ttl,
          t.evicted_memory};
      for (int e = 0; e < kNumEmbeddingEvents; ++e) {
        const int64_t grown = now[e] - (*last)[e];
        if (grown > 0) {
          m.embedding_events(static_cast<EmbeddingEvent>(e))
              .Increment(static_cast<double>(grown));
        }
        (*last)[e] = now[e];
      }
    }
    m.model_version(MetricRole::kPs).Set(static_cast<double>(info.version));
    m.pending_pulls().Set(static_cast<double>(info.pending_pulls));
    m.generation(MetricRole::kPs).Set(static_cast<double>(info.max_generation));
    if (checkpointer != nullptr) {
      m.checkpoint_age_seconds(MetricRole::kPs)
          .Set(AgeSeconds(checkpointer->last_checkpoint_time()));
    }
  });
}

std::unique_ptr<ScrapeHook> ExportCoordinatorGauges(Coordinator* coordinator) {
  // The coordinator counts its bytes cumulatively; each scrape adds what
  // grew since the previous one (hooks run one at a time).
  auto bytes =
      std::make_shared<CumulativeBytesExport>(MetricRole::kCoordinator);
  return RegisterScrapeHook([coordinator, bytes] {
    const CoordinatorGauges g = coordinator->Gauges();
    FerryMetrics& m = Metrics();
    m.members().Set(static_cast<double>(g.members));
    m.generation(MetricRole::kCoordinator)
        .Set(static_cast<double>(g.generation));
    m.model_version(MetricRole::kCoordinator)
        .Set(static_cast<double>(g.steps_applied));
    m.checkpoint_age_seconds(MetricRole::kCoordinator)
        .Set(AgeSeconds(g.last_state_write));
    std::set<std::string> roles;
    for (const auto& [role, n] : g.own_bytes.sent()) roles.insert(role);
    for (const auto& [role, n] : g.own_bytes.received()) roles.insert(role);
    for (const std::string& role : roles) {
      const auto sent = g.own_bytes.sent().find(role);
      const auto received = g.own_bytes.received().find(role);
      bytes->Update(
          role, sent == g.own_bytes.sent().end() ? 0 : sent->second,
          received == g.own_bytes.received().end() ? 0 : received->second);
    }
  });
}

}  // namespace ferry

#include "server/server_metrics.h"

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace ferry {

std::unique_ptr<ScrapeHook> ExportCoordinatorGauges(Coordinator* coordinator) {
  // The coordinator counts its bytes cumulatively; each scrape adds what
  // grew since the previous one (hooks run one at a time).
  auto bytes =
      std::make_shared<CumulativeBytesExport>(MetricRole::kCoordinator);
  return RegisterScrapeHook([coordinator, bytes] {
    const CoordinatorGauges g = coordinator->Gauges();
    FerryMetrics& m = Metrics();
    m.members().Set(static_cast<double>(g.members));
    m.train_samples_per_second().Set(g.window.samples_per_second());
    m.train_step_seconds().Set(g.window.step_seconds());
    m.generation(MetricRole::kCoordinator)
        .Set(static_cast<double>(g.generation));
    m.model_version(MetricRole::kCoordinator)
        .Set(static_cast<double>(g.steps_applied));
    m.job_samples_applied().Set(static_cast<double>(g.samples_applied));
    m.job_finished().Set(g.finished ? 1 : 0);
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

// /metrics for the coordinator: a scrape hook (common/prometheus_metrics.h)
// that copies its state into ferry's gauges right before every scrape, so
// the core class stays free of prometheus. Counters and latency histograms
// are observed inline by the core classes. A shard's gauges are
// ps/shard_gauges.h.
//
// Wiring in a main (after the coordinator exists, before serving):
//   auto gauges = ExportCoordinatorGauges(coordinator.get());
// and destroy `gauges` before the coordinator.
//
// Thread safety: the hook runs on the exposer's threads; the coordinator is
// thread-safe.
#ifndef FERRY_SERVER_SERVER_METRICS_H_
#define FERRY_SERVER_SERVER_METRICS_H_

#include <memory>

#include "common/prometheus_metrics.h"
#include "coordinator/coordinator.h"

namespace ferry {

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

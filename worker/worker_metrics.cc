#include "worker/worker_metrics.h"

namespace ferry {

void WorkerStepMetrics::Record(int64_t samples, int64_t generation,
                               const v1::ByteCounts& totals) {
  Metrics().steps(MetricRole::kWorker).Increment();
  Metrics()
      .samples(MetricRole::kWorker)
      .Increment(static_cast<double>(samples));
  Metrics()
      .generation(MetricRole::kWorker)
      .Set(static_cast<double>(generation));
  for (const auto& [role, sent] : totals.sent()) {
    const auto received = totals.received().find(role);
    bytes_.Update(role, sent,
                  received == totals.received().end() ? 0 : received->second);
  }
}

}  // namespace ferry

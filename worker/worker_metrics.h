// A worker's per-step Prometheus updates: ferry_steps_total,
// ferry_samples_total, ferry_generation and ferry_bytes_total{role=worker}
// (from the cumulative byte counts the worker reports with every step).
// Thread-compatible: call from the thread that runs the training loop.
#ifndef FERRY_WORKER_WORKER_METRICS_H_
#define FERRY_WORKER_WORKER_METRICS_H_

#include <cstdint>

#include "common/prometheus_metrics.h"
#include "ferry/v1/common.pb.h"

namespace ferry {

class WorkerStepMetrics {
 public:
  // One finished step of `samples` samples, seen at membership `generation`;
  // `totals` are the worker's cumulative bytes by peer role.
  void Record(int64_t samples, int64_t generation,
              const v1::ByteCounts& totals);

 private:
  CumulativeBytesExport bytes_{MetricRole::kWorker};
};

}  // namespace ferry

#endif  // FERRY_WORKER_WORKER_METRICS_H_

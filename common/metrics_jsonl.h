// JsonlMetricsSink: training curves as JSON lines, one object per point,
// each line flushed as written (a crash loses at most the line in writing).
//
// Step lines: {"kind":"step","step","unix_seconds","elapsed_seconds","epoch",
//   "mode","train_loss","train_accuracy","samples","workers","bytes_sent",
//   "bytes_received","bytes_workers","began_seconds","ended_seconds",
//   "step_seconds","compute_seconds","comm_seconds"}
//   ("elapsed_seconds" is when the coordinator recorded the step; the
//   step's own times are began/ended_seconds, on the workers' clocks)
// Evaluation lines: {"kind":"eval","step","unix_seconds","elapsed_seconds",
//   "epoch","final","mode","test_accuracy","test_loss"} and "test_auc" when
//   the evaluation has one (CTR models)
// (field meanings: StepMetrics / EvalMetrics in training_metrics.h).
//
// The file is opened for appending: a restarted process goes on in the same
// file (a step may then appear twice; readers keep the last line of a step).
//
// Thread safety: thread-safe.
#ifndef FERRY_COMMON_METRICS_JSONL_H_
#define FERRY_COMMON_METRICS_JSONL_H_

#include <cstdio>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/training_metrics.h"
#include "nlohmann/json.hpp"

namespace ferry {

// The JSON object of one point (exposed for tests).
nlohmann::json StepMetricsJson(const StepMetrics& m);
nlohmann::json EvalMetricsJson(const EvalMetrics& m);

class JsonlMetricsSink final : public MetricsSink {
 public:
  // Opens `path` for appending. NOT_FOUND when its directory does not
  // exist, PERMISSION_DENIED when it cannot be written, INTERNAL otherwise;
  // the message names the path.
  static absl::StatusOr<std::unique_ptr<JsonlMetricsSink>> Open(
      const std::string& path);
  ~JsonlMetricsSink() override;

  void RecordStep(const StepMetrics& m) override;
  void RecordEval(const EvalMetrics& m) override;
  const std::string& path() const { return path_; }

 private:
  JsonlMetricsSink(std::string path, std::FILE* file)
      : path_(std::move(path)), file_(file) {}
  void WriteLine(const nlohmann::json& j);

  const std::string path_;
  absl::Mutex mu_;
  std::FILE* file_ ABSL_GUARDED_BY(mu_);
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ferry

#endif  // FERRY_COMMON_METRICS_JSONL_H_

// Training curves: what a trainer (the coordinator, or the standalone
// trainer) reports per committed step and per test-set evaluation, the
// MetricsSink interface that receives it, and the factory of the two file
// sinks behind --metrics-jsonl (common/metrics_jsonl.h) and
// --tensorboard-dir (TensorBoardMetricsSink below, over tfevents_writer.h).
//
// A sink never fails a training job: a write error after opening is
// printed once to stderr and later points are dropped. Opening errors are
// returned as Status so that a server refuses to start.
//
// Thread safety: every sink here is thread-safe; points are written in the
// order of the calls.
#ifndef FERRY_COMMON_TRAINING_METRICS_H_
#define FERRY_COMMON_TRAINING_METRICS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ferry {

class TfEventsWriter;

// One committed (applied) training step.
struct StepMetrics {
  // Optimizer updates applied including this one (the shard version after
  // it, 1-based). Test evaluations use the same axis (EvalMetrics.step).
  int64_t step = 0;
  absl::Time time;             // when the coordinator recorded it
  double elapsed_seconds = 0;  // `time`, since the job started (restarts too)
  int64_t epoch = 0;
  std::string mode;           // "ps", "ring" or "standalone"
  double train_loss = 0;      // mean over the step's samples
  double train_accuracy = 0;  // fraction of the step's samples right
  // The learning rate of the update (the first parameter group's).
  double lr = 0;
  int64_t samples = 0;  // samples in this step
  int64_t workers = 0;  // contributors of this step
  // Payload bytes sent / received by all workers so far (cumulative,
  // workers that left included) and how many workers they cover.
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int64_t bytes_workers = 0;
  // The same split: the data plane (to/from shards or ring peers) and the
  // control plane (to/from the coordinator).
  int64_t data_bytes_sent = 0;
  int64_t data_bytes_received = 0;
  int64_t control_bytes_sent = 0;
  int64_t control_bytes_received = 0;
  // PS: all workers' traffic with each shard ("ps0", ...), cumulative.
  struct PeerTraffic {
    int64_t sent = 0;
    int64_t received = 0;
    int64_t calls = 0;  // pulls + push streams
  };
  std::map<std::string, PeerTraffic> peers;
  // When the step's work began and ended, on the workers' clocks (the
  // earliest beginning and the latest exchange end of its contributors;
  // common/throughput_window.h), as seconds since the job started: unlike
  // `time`, which is when the coordinator recorded it and may lag and bunch.
  double began_seconds = 0;
  double ended_seconds = 0;
  // From the previous step's end to this one's (the first step: from its
  // own beginning). Pauses between steps (an evaluation's hold, a
  // recovery) count in the step after them, as in the throughput window.
  double step_seconds = 0;
  double compute_seconds = 0;  // mean over the step's contributors
  double comm_seconds = 0;     // mean over the step's contributors
};

// One evaluation of the weights on the test set.
struct EvalMetrics {
  int64_t step = 0;  // the version evaluated (steps applied)
  absl::Time time;
  double elapsed_seconds = 0;
  int64_t epoch = 0;   // the epoch it followed
  bool final = false;  // the evaluation at the end of the job
  std::string mode;
  double test_accuracy = 0;
  double test_loss = 0;                           // CTR models: the log loss
  std::optional<double> test_auc = std::nullopt;  // CTR models: the ROC AUC
};

class MetricsSink {
 public:
  virtual ~MetricsSink() = default;
  virtual void RecordStep(const StepMetrics& m) = 0;
  virtual void RecordEval(const EvalMetrics& m) = 0;
};

// Forwards every point to each of `sinks` in order.
class MetricsFanOut final : public MetricsSink {
 public:
  explicit MetricsFanOut(std::vector<std::unique_ptr<MetricsSink>> sinks)
      : sinks_(std::move(sinks)) {}
  void RecordStep(const StepMetrics& m) override;
  void RecordEval(const EvalMetrics& m) override;

 private:
  std::vector<std::unique_ptr<MetricsSink>> sinks_;
};

// Scalars as TensorBoard tags, one event per point: "train/loss",
// "train/accuracy", "train/samples", "cluster/workers", "comm/bytes_sent",
// "comm/bytes_received", "comm/bytes_sent_per_worker",
// "comm/bytes_received_per_worker", "time/step_seconds",
// "time/compute_seconds", "time/comm_seconds", "time/elapsed_seconds";
// evaluations: "test/accuracy", "test/loss" and, when set, "test/auc".
class TensorBoardMetricsSink final : public MetricsSink {
 public:
  explicit TensorBoardMetricsSink(std::unique_ptr<TfEventsWriter> writer);
  ~TensorBoardMetricsSink() override;
  void RecordStep(const StepMetrics& m) override;
  void RecordEval(const EvalMetrics& m) override;

 private:
  void Write(int64_t step, absl::Time time,
             const std::vector<std::pair<std::string, float>>& values);

  std::unique_ptr<TfEventsWriter> writer_;
  absl::Mutex mu_;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
};

// The sinks that the flags ask for: a JSONL file at `jsonl_path` (appended
// to; its directory must exist) and/or a new event file in
// `tensorboard_dir` (created with its parents when missing). nullptr when
// both are empty. Errors name the path and the flag: NOT_FOUND for a
// missing directory of the JSONL file, PERMISSION_DENIED when it cannot be
// written, INTERNAL otherwise.
absl::StatusOr<std::unique_ptr<MetricsSink>> OpenMetricsSinks(
    const std::string& jsonl_path, const std::string& tensorboard_dir);

// What OpenMetricsSinks would say, without starting an event file: for a
// launcher that hands the paths to another process. May create the JSONL
// file (empty) and the TensorBoard directory.
absl::Status CheckMetricsPaths(const std::string& jsonl_path,
                               const std::string& tensorboard_dir);

}  // namespace ferry

#endif  // FERRY_COMMON_TRAINING_METRICS_H_

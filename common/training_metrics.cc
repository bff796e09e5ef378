#include "common/training_metrics.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/metrics_jsonl.h"
#include "common/status_macros.h"
#include "common/tfevents_writer.h"

namespace ferry {

void MetricsFanOut::RecordStep(const StepMetrics& m) {
  for (auto& sink : sinks_) sink->RecordStep(m);
}

void MetricsFanOut::RecordEval(const EvalMetrics& m) {
  for (auto& sink : sinks_) sink->RecordEval(m);
}

TensorBoardMetricsSink::TensorBoardMetricsSink(
    std::unique_ptr<TfEventsWriter> writer)
    : writer_(std::move(writer)) {}

TensorBoardMetricsSink::~TensorBoardMetricsSink() = default;

void TensorBoardMetricsSink::RecordStep(const StepMetrics& m) {
  const double per = static_cast<double>(std::max<int64_t>(1, m.bytes_workers));
  const std::vector<std::pair<std::string, float>> values = {
      {"train/loss", static_cast<float>(m.train_loss)},
      {"train/accuracy", static_cast<float>(m.train_accuracy)},
      {"train/lr", static_cast<float>(m.lr)},
      {"train/samples", static_cast<float>(m.samples)},
      {"cluster/workers", static_cast<float>(m.workers)},
      {"comm/bytes_sent", static_cast<float>(m.bytes_sent)},
      {"comm/bytes_received", static_cast<float>(m.bytes_received)},
      {"comm/bytes_sent_per_worker", static_cast<float>(m.bytes_sent / per)},
      {"comm/bytes_received_per_worker",
       static_cast<float>(m.bytes_received / per)},
      {"time/step_seconds", static_cast<float>(m.step_seconds)},
      {"time/compute_seconds", static_cast<float>(m.compute_seconds)},
      {"time/comm_seconds", static_cast<float>(m.comm_seconds)},
      {"time/elapsed_seconds", static_cast<float>(m.elapsed_seconds)}};
  Write(m.step, m.time, values);
}

void TensorBoardMetricsSink::Write(
    int64_t step, absl::Time time,
    const std::vector<std::pair<std::string, float>>& values) {
  absl::MutexLock lock(&mu_);
  if (failed_) return;
  if (absl::Status s = writer_->WriteScalars(step, time, values); !s.ok()) {
    failed_ = true;
    std::fprintf(stderr, "ferry: %s; no more TensorBoard points go there\n",
                 s.ToString().c_str());
  }
}

void TensorBoardMetricsSink::RecordEval(const EvalMetrics& m) {
  std::vector<std::pair<std::string, float>> values = {
      {"test/accuracy", static_cast<float>(m.test_accuracy)},
      {"test/loss", static_cast<float>(m.test_loss)}};
  if (m.test_auc.has_value()) {
    values.emplace_back("test/auc", static_cast<float>(*m.test_auc));
  }
  Write(m.step, m.time, values);
}

absl::Status CheckMetricsPaths(const std::string& jsonl_path,
                               const std::string& tensorboard_dir) {
  ASSIGN_OR_RETURN(auto jsonl, OpenMetricsSinks(jsonl_path, ""));
  if (tensorboard_dir.empty()) return absl::OkStatus();
  std::error_code ec;
  std::filesystem::create_directories(tensorboard_dir, ec);
  if (!ec && access(tensorboard_dir.c_str(), W_OK) != 0) {
    ec = std::error_code(errno, std::generic_category());
  }
  if (!ec) return absl::OkStatus();
  const std::string message =
      absl::StrCat("--tensorboard-dir: cannot write to ", tensorboard_dir, ": ",
                   ec.message());
  if (ec == std::errc::permission_denied ||
      ec == std::errc::operation_not_permitted ||
      ec == std::errc::read_only_file_system) {
    return absl::PermissionDeniedError(message);
  }
  return absl::InternalError(message);
}

absl::StatusOr<std::unique_ptr<MetricsSink>> OpenMetricsSinks(
    const std::string& jsonl_path, const std::string& tensorboard_dir) {
  std::vector<std::unique_ptr<MetricsSink>> sinks;
  if (!jsonl_path.empty()) {
    auto jsonl = JsonlMetricsSink::Open(jsonl_path);
    if (!jsonl.ok()) {
      return absl::Status(
          jsonl.status().code(),
          "--metrics-jsonl: " + std::string(jsonl.status().message()));
    }
    sinks.push_back(*std::move(jsonl));
  }
  if (!tensorboard_dir.empty()) {
    auto writer = TfEventsWriter::Open(tensorboard_dir);
    if (!writer.ok()) {
      return absl::Status(
          writer.status().code(),
          "--tensorboard-dir: " + std::string(writer.status().message()));
    }
    sinks.push_back(
        std::make_unique<TensorBoardMetricsSink>(*std::move(writer)));
  }
  if (sinks.empty()) return std::unique_ptr<MetricsSink>();
  if (sinks.size() == 1) return std::move(sinks.front());
  return std::unique_ptr<MetricsSink>(new MetricsFanOut(std::move(sinks)));
}

}  // namespace ferry

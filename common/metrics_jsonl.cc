#include "common/metrics_jsonl.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ferry {
namespace {

double UnixSeconds(absl::Time t) {
  return absl::ToDoubleSeconds(t - absl::UnixEpoch());
}

}  // namespace

nlohmann::json StepMetricsJson(const StepMetrics& m) {
  nlohmann::json peers = nlohmann::json::object(),
                 calls = nlohmann::json::object();
  for (const auto& [peer, t] : m.peers) {
    peers[peer] = {{"sent", t.sent}, {"received", t.received}};
    calls[peer] = t.calls;
  }
  return {{"kind", "step"},
          {"step", m.step},
          {"unix_seconds", UnixSeconds(m.time)},
          {"elapsed_seconds", m.elapsed_seconds},
          {"epoch", m.epoch},
          {"mode", m.mode},
          {"train_loss", m.train_loss},
          {"train_accuracy", m.train_accuracy},
          {"lr", m.lr},
          {"samples", m.samples},
          {"workers", m.workers},
          {"bytes_sent", m.bytes_sent},
          {"bytes_received", m.bytes_received},
          {"bytes_workers", m.bytes_workers},
          {"data_bytes",
           {{"sent", m.data_bytes_sent}, {"received", m.data_bytes_received}}},
          {"control_bytes",
           {{"sent", m.control_bytes_sent},
            {"received", m.control_bytes_received}}},
          {"peer_bytes", peers},
          {"shard_requests", calls},
          {"began_seconds", m.began_seconds},
          {"ended_seconds", m.ended_seconds},
          {"step_seconds", m.step_seconds},
          {"compute_seconds", m.compute_seconds},
          {"comm_seconds", m.comm_seconds}};
}

nlohmann::json EvalMetricsJson(const EvalMetrics& m) {
  nlohmann::json j = {{"kind", "eval"},
                      {"step", m.step},
                      {"unix_seconds", UnixSeconds(m.time)},
                      {"elapsed_seconds", m.elapsed_seconds},
                      {"epoch", m.epoch},
                      {"final", m.final},
                      {"mode", m.mode},
                      {"test_accuracy", m.test_accuracy},
                      {"test_loss", m.test_loss}};
  if (m.test_auc.has_value()) j["test_auc"] = *m.test_auc;
  return j;
}

absl::StatusOr<std::unique_ptr<JsonlMetricsSink>> JsonlMetricsSink::Open(
    const std::string& path) {
  if (path.empty())
    return absl::InvalidArgumentError("the metrics JSONL path is empty");
  std::FILE* file = std::fopen(path.c_str(), "a");
  if (file == nullptr) {
    const int err = errno;
    const std::string message =
        absl::StrCat("cannot open the metrics file ", path,
                     " for appending: ", std::strerror(err));
    if (err == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat(message, " (create its directory first)"));
    }
    if (err == EACCES || err == EPERM || err == EROFS) {
      return absl::PermissionDeniedError(message);
    }
    return absl::InternalError(message);
  }
  return std::unique_ptr<JsonlMetricsSink>(new JsonlMetricsSink(path, file));
}

JsonlMetricsSink::~JsonlMetricsSink() {
  absl::MutexLock lock(&mu_);
  std::fclose(file_);
}

void JsonlMetricsSink::RecordStep(const StepMetrics& m) {
  WriteLine(StepMetricsJson(m));
}

void JsonlMetricsSink::RecordEval(const EvalMetrics& m) {
  WriteLine(EvalMetricsJson(m));
}

void JsonlMetricsSink::WriteLine(const nlohmann::json& j) {
  // NaN/inf (a diverged loss) are written as null (nlohmann's rule); bad
  // UTF-8 in a string is replaced rather than throwing.
  const std::string line =
      j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  absl::MutexLock lock(&mu_);
  if (failed_) return;
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() ||
      std::fflush(file_) != 0) {
    failed_ = true;
    std::fprintf(stderr,
                 "ferry: writing the metrics file %s failed (%s); no more "
                 "points go there\n",
                 path_.c_str(), std::strerror(errno));
  }
}

}  // namespace ferry

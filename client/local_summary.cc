// BuildSummary (client/local_cluster.h): a finished `ferry local` job's
// summary JSON from the coordinator's status and the shards' ShardInfo.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/local_cluster.h"
#include "client/measurement_checks.h"

namespace ferry {
namespace {

// A window's worker-seconds per worker report (one worker's step).
double PerReport(double worker_seconds, double reports) {
  return reports > 0 ? worker_seconds / reports : 0.0;
}

}  // namespace

nlohmann::json BuildSummary(const LocalClusterOptions& options,
                            const std::string& status_json,
                            const std::vector<std::string>& shard_info_json) {
  const nlohmann::json s = nlohmann::json::parse(status_json);
  auto num = [](const nlohmann::json& j, const char* key) -> double {
    if (!j.contains(key)) return 0.0;
    const auto& v = j.at(key);
    return v.is_string() ? std::stod(v.get<std::string>()) : v.get<double>();
  };
  nlohmann::json bytes = {{"worker", {{"sent", 0}, {"received", 0}}},
                          {"ps", {{"sent", 0}, {"received", 0}}},
                          {"coordinator", {{"sent", 0}, {"received", 0}}}};
  auto add_counts = [&](const char* role, const nlohmann::json& counts) {
    for (const char* dir : {"sent", "received"}) {
      if (!counts.contains(dir)) continue;
      for (const auto& [peer, n] : counts.at(dir).items()) {
        bytes[role][dir] = bytes[role][dir].get<int64_t>() +
                           (n.is_string() ? std::stoll(n.get<std::string>())
                                          : n.get<int64_t>());
      }
    }
  };
  // Workers' bytes split by the peer role they went to or came from.
  nlohmann::json by_peer = nlohmann::json::object();
  if (s.contains("worker_bytes")) {
    for (const auto& [id, counts] : s.at("worker_bytes").items()) {
      add_counts("worker", counts);
      for (const char* dir : {"sent", "received"}) {
        if (!counts.contains(dir)) continue;
        for (const auto& [peer, n] : counts.at(dir).items()) {
          const int64_t v = n.is_string() ? std::stoll(n.get<std::string>())
                                          : n.get<int64_t>();
          nlohmann::json& slot = by_peer[peer][dir];
          slot = (slot.is_null() ? int64_t{0} : slot.get<int64_t>()) + v;
        }
      }
    }
  }
  if (s.contains("coordinator_bytes"))
    add_counts("coordinator", s.at("coordinator_bytes"));
  for (const std::string& info : shard_info_json) {
    const nlohmann::json j = nlohmann::json::parse(info);
    if (j.contains("bytes")) add_counts("ps", j.at("bytes"));
  }
  // Worker traffic per individual shard ("ps0", ...), summed over workers.
  nlohmann::json by_shard = nlohmann::json::object();
  if (s.contains("worker_peer_bytes")) {
    for (const auto& [id, counts] : s.at("worker_peer_bytes").items()) {
      for (const char* dir : {"sent", "received"}) {
        if (!counts.contains(dir)) continue;
        for (const auto& [peer, n] : counts.at(dir).items()) {
          const int64_t v = n.is_string() ? std::stoll(n.get<std::string>())
                                          : n.get<int64_t>();
          nlohmann::json& slot = by_shard[peer][dir];
          slot = (slot.is_null() ? int64_t{0} : slot.get<int64_t>()) + v;
        }
      }
    }
  }
  const double steps = num(s, "step");
  const int workers_seen = static_cast<int>(num(s, "workers_seen"));
  const double worker_bytes = bytes["worker"]["sent"].get<double>() +
                              bytes["worker"]["received"].get<double>();
  double test_accuracy = 0, final_loss = num(s, "train_loss");
  // CTR (DLRM) jobs: the last evaluation's AUC and log loss.
  bool has_auc = false;
  double test_auc = 0, test_logloss = 0;
  // Ring mode's DLRM jobs: the evaluated member's tables.
  nlohmann::json member_tables = nlohmann::json::object();
  nlohmann::json evals = nlohmann::json::array();
  if (s.contains("evals")) {
    for (const auto& e : s.at("evals")) {
      nlohmann::json point = {{"step", static_cast<int64_t>(num(e, "step"))},
                              {"epoch", static_cast<int64_t>(num(e, "epoch"))},
                              {"test_accuracy", num(e, "test_accuracy")},
                              {"test_loss", num(e, "test_loss")},
                              {"seconds", num(e, "seconds")},
                              {"final", e.value("final", false)}};
      test_accuracy = num(e, "test_accuracy");
      has_auc = e.contains("test_auc");
      if (has_auc) {
        test_auc = num(e, "test_auc");
        test_logloss = num(e, "test_loss");
        point["test_auc"] = test_auc;
      }
      if (e.contains("embedding_rows")) {
        member_tables = {
            {"rows", static_cast<int64_t>(num(e, "embedding_rows"))},
            {"pending_ids",
             static_cast<int64_t>(num(e, "embedding_pending_ids"))}};
      }
      evals.push_back(std::move(point));
    }
  }
  nlohmann::json accounting = nlohmann::json::array();
  if (s.contains("accounting")) {
    for (const auto& a : s.at("accounting")) {
      auto whole = [&](const char* key) {
        return static_cast<int64_t>(num(a, key));
      };
      accounting.push_back({{"epoch", whole("epoch")},
                            {"samples_applied", whole("samples_applied")},
                            {"samples_released", whole("samples_released")},
                            {"samples_dropped", whole("samples_dropped")}});
    }
  }
  // The coordinator's job events (joins, evictions, aborted steps,
  // rollbacks, restarts, checkpoints), oldest first.
  nlohmann::json events = nlohmann::json::array();
  if (s.contains("events")) {
    for (const auto& e : s.at("events")) {
      events.push_back(
          {{"unix_seconds", num(e, "unix_seconds")},
           {"kind", e.value("kind", "")},
           {"worker_id", e.value("worker_id", "")},
           {"step", static_cast<int64_t>(num(e, "step"))},
           {"samples_lost", static_cast<int64_t>(num(e, "samples_lost"))},
           {"detail", e.value("detail", "")}});
    }
  }
  nlohmann::json summary = {
      {"mode", options.mode},
      {"consistency", options.consistency},
      {"workers", options.workers},
      {"shards", options.mode == "ring" ? 0 : options.shards},
      {"partitions", options.mode == "ring" ? 0 : options.partitions},
      {"epochs", options.epochs},
      {"global_batch", options.global_batch},
      {"steps", static_cast<int64_t>(steps)},
      {"wall_seconds", num(s, "wall_seconds")},
      {"samples_per_second", num(s, "samples_per_second")},
      {"startup_seconds", num(s, "startup_seconds")},
      {"eval_seconds", num(s, "eval_seconds")},
      {"window_seconds", num(s, "window_seconds")},
      {"window_work_seconds", num(s, "window_work_seconds")},
      {"window_samples", static_cast<int64_t>(num(s, "window_samples"))},
      {"window_steps", static_cast<int64_t>(num(s, "window_steps"))},
      {"step_seconds", num(s, "step_seconds")},
      {"window_compute_seconds_per_worker_step",
       PerReport(num(s, "window_compute_seconds"), num(s, "window_reports"))},
      {"window_comm_seconds_per_worker_step",
       PerReport(num(s, "window_comm_seconds"), num(s, "window_reports"))},
      {"test_accuracy", test_accuracy},
      {"final_eval_error", s.value("final_eval_error", std::string())},
      {"final_loss", final_loss},
      {"bytes", bytes},
      {"bytes_per_step_per_worker", steps > 0 && workers_seen > 0
                                        ? worker_bytes / steps / workers_seen
                                        : 0.0},
      {"compute_seconds", num(s, "compute_seconds")},
      {"comm_seconds", num(s, "comm_seconds")},
      {"workers_seen", workers_seen},
      {"worker_bytes_by_peer", by_peer},
      {"worker_bytes_by_shard", by_shard},
      {"digest_checks", static_cast<int64_t>(num(s, "digest_checks"))},
      {"digest_mismatches", static_cast<int64_t>(num(s, "digest_mismatches"))},
      {"epochs_accounting", accounting},
      {"evals", evals},
      {"events", events},
      {"aborted_steps", static_cast<int64_t>(num(s, "aborted_steps"))},
      {"rollbacks", static_cast<int64_t>(num(s, "rollbacks"))},
      {"checkpoint_version",
       s.contains("checkpoint_version")
           ? static_cast<int64_t>(num(s, "checkpoint_version"))
           : int64_t{-1}},
      {"coordinator_restarts", static_cast<int64_t>(num(s, "restarts"))}};
  // Each shard's version at the end (PS modes): sync, the job's applied
  // steps; async, the pushes it applied. A fault checker compares them.
  nlohmann::json shard_versions = nlohmann::json::array();
  for (const std::string& info : shard_info_json) {
    shard_versions.push_back(
        static_cast<int64_t>(num(nlohmann::json::parse(info), "version")));
  }
  summary["shard_versions"] = shard_versions;
  if (has_auc) {
    summary["test_auc"] = test_auc;
    summary["test_logloss"] = test_logloss;
    summary["unique_ids_per_step"] =
        steps > 0 ? num(s, "unique_ids") / steps : 0.0;
    // The shards' embedding rows and counters, summed (ring mode: the
    // evaluated member's, every member holding the whole tables).
    nlohmann::json embedding = member_tables;
    for (const std::string& info : shard_info_json) {
      const nlohmann::json j = nlohmann::json::parse(info);
      if (!j.contains("sparse")) continue;
      for (const auto& [key, value] : j.at("sparse").items()) {
        const int64_t v =
            static_cast<int64_t>(num(j.at("sparse"), key.c_str()));
        embedding[key] =
            (embedding.contains(key) ? embedding[key].get<int64_t>() : 0) + v;
        (void)value;
      }
    }
    summary["embedding_rows"] =
        embedding.contains("rows") ? embedding["rows"].get<int64_t>() : 0;
    summary["embedding"] = std::move(embedding);
  }
  // A status printed with every field has "pipeline": [] for other jobs.
  if (s.contains("pipeline") && !s.at("pipeline").empty()) {
    // Per role, the workers' pipeline figures summed over their steps; the
    // measured bubble is the mean idle share of the stages.
    nlohmann::json roles = nlohmann::json::array();
    double idle_sum = 0.0;
    int stages = 0;
    for (const auto& p : s.at("pipeline")) {
      const double busy = num(p, "busy_seconds");
      const double step = num(p, "step_seconds");
      const double idle = step > 0 ? std::max(0.0, 1.0 - busy / step) : 0.0;
      const std::string role = p.value("role", "");
      if (role != "alone") {
        idle_sum += idle;
        ++stages;
      }
      roles.push_back(
          {{"role", role},
           {"steps", static_cast<int64_t>(num(p, "steps"))},
           {"busy_seconds", busy},
           {"wait_seconds", num(p, "wait_seconds")},
           {"step_seconds", step},
           {"idle_share", idle},
           {"peak_activation_bytes",
            static_cast<int64_t>(num(p, "peak_activation_bytes"))},
           {"neighbour_bytes_sent",
            static_cast<int64_t>(num(p, "neighbour_bytes_sent"))},
           {"neighbour_bytes_received",
            static_cast<int64_t>(num(p, "neighbour_bytes_received"))}});
    }
    summary["pipeline"] = {
        {"roles", std::move(roles)},
        {"measured_bubble", stages > 0 ? idle_sum / stages : 0.0}};
  }
  // The physical checks (client/measurement_checks.h) over the window; the
  // link check is `ferry bench compare`'s (it has each link's bytes).
  MeasuredWindow w;
  w.window_seconds = num(s, "window_seconds");
  w.work_seconds = num(s, "window_work_seconds");
  w.window_steps = static_cast<int64_t>(num(s, "window_steps"));
  w.window_samples = static_cast<int64_t>(num(s, "window_samples"));
  w.samples_per_second = num(s, "samples_per_second");
  w.compute_worker_seconds = num(s, "window_compute_seconds");
  w.comm_worker_seconds = num(s, "window_comm_seconds");
  // Every worker the job saw: an upper bound of those side by side.
  w.workers = std::max(1, workers_seen);
  nlohmann::json invalid = nlohmann::json::array();
  if (w.window_steps > 0) {
    for (const std::string& r : CheckMeasurement(w)) invalid.push_back(r);
  }
  summary["invalid"] = invalid;
  return summary;
}

}  // namespace ferry

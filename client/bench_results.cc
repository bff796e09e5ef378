#include "client/bench_results.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "client/measurement_checks.h"
#include "client/memory_model.h"
#include "common/link_shaper.h"
#include "common/throughput_window.h"
#include "model/model_presets.h"

namespace ferry {
namespace {

double Num(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return 0.0;
  const nlohmann::json& v = j.at(key);
  if (v.is_string()) return std::stod(v.get<std::string>());
  return v.is_number() ? v.get<double>() : 0.0;
}

double Both(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return 0.0;
  return Num(j.at(key), "sent") + Num(j.at(key), "received");
}

double RelativeError(double measured, double predicted) {
  if (predicted == 0) return measured == 0 ? 0.0 : 1.0;
  return (measured - predicted) / predicted;
}

std::string Percent(double x) { return absl::StrFormat("%+.1f%%", 100 * x); }

// The class count of a model spec; 0 when it does not resolve.
int ModelClasses(const std::string& spec) {
  absl::StatusOr<ModelDef> def = ResolveModelSpec(spec);
  return def.ok() ? static_cast<int>(def->classes) : 0;
}

}  // namespace

bool IsPsMode(const std::string& mode) {
  return mode == "ps" || mode == "ps-colocated";
}

bool ModeHasShards(const std::string& mode) {
  return IsPsMode(mode) || mode == "hybrid";
}

std::string BenchConfig::Name() const {
  std::string name = absl::StrCat(mode, "-", model, "-w", workers);
  if (ModeHasShards(mode)) {
    absl::StrAppend(&name, "-s", shards, "-", consistency);
    if (partitions > 1) absl::StrAppend(&name, "-k", partitions);
  }
  if (full_table_rows > 0) absl::StrAppend(&name, "-n", full_table_rows);
  absl::StrAppend(&name, "-", compression, "-",
                  bandwidth == "0" ? "nolimit" : bandwidth);
  if (latency != "0") absl::StrAppend(&name, "-", latency);
  return absl::StrReplaceAll(name, {{":", ""}, {"/", ""}, {".", "p"}});
}

absl::StatusOr<BenchMeasurement> MeasureRun(
    const std::vector<nlohmann::json>& lines, const nlohmann::json& summary,
    int workers, int warmup_steps) {
  // The window's lines, in step order (a restarted coordinator may write a
  // step twice: the last line of a step counts).
  std::map<int64_t, const nlohmann::json*> window;
  for (const nlohmann::json& line : lines) {
    if (!line.contains("step") || !line.contains("data_bytes"))
      continue;  // eval lines
    if (Num(line, "step") < warmup_steps) continue;
    window[static_cast<int64_t>(Num(line, "step"))] = &line;
  }
  if (window.size() < 2) {
    return absl::FailedPreconditionError(
        absl::StrCat("only ", window.size(), " of ", lines.size(),
                     " metrics lines at step >= ", warmup_steps,
                     ": the run was too short to measure (raise --steps)"));
  }
  for (const auto& [step, line] : window) {
    if (!line->contains("ended_seconds")) {
      return absl::FailedPreconditionError(absl::StrCat(
          "metrics line of step ", step,
          " has no ended_seconds: written by a ferry without step clocks"));
    }
  }
  const nlohmann::json& a = *window.begin()->second;
  const nlohmann::json& b = *window.rbegin()->second;
  // Times: the steps' own ends (workers' clocks), whatever order and
  // moment the coordinator recorded them in.
  ThroughputWindow timed;
  for (const auto& entry : window) {
    const nlohmann::json* line = entry.second;
    const double contributors = std::max(1.0, Num(*line, "workers"));
    const auto at = [line](const char* key) {
      return absl::UnixEpoch() + absl::Seconds(Num(*line, key));
    };
    timed.Add({.ended = at("ended_seconds"),
               .began = line->contains("began_seconds")
                            ? std::optional<absl::Time>(at("began_seconds"))
                            : std::nullopt,
               .samples = static_cast<int64_t>(Num(*line, "samples")),
               .reports = static_cast<int64_t>(contributors),
               .compute_seconds = Num(*line, "compute_seconds") * contributors,
               .comm_seconds = Num(*line, "comm_seconds") * contributors});
  }
  const WindowFigures f = timed.figures();
  BenchMeasurement m;
  m.steps = f.steps;
  m.window_seconds = f.seconds;
  m.work_seconds = f.work_seconds;
  m.window_samples = f.samples;
  m.samples_per_second = f.samples_per_second();
  m.step_seconds = f.step_seconds();
  m.compute_worker_seconds = f.compute_seconds;
  m.comm_worker_seconds = f.comm_seconds;
  // Per worker step: the window's worker-seconds over its reports. Bytes
  // are cumulative: per step over the steps after the window's first.
  m.compute_seconds = f.reports > 0 ? f.compute_seconds / f.reports : 0.0;
  m.comm_seconds = f.reports > 0 ? f.comm_seconds / f.reports : 0.0;
  const double per_step = 1.0 / std::max<int64_t>(1, m.steps);
  const double per_worker_step = per_step / workers;
  m.bytes_sent_per_worker =
      (Num(b.at("data_bytes"), "sent") - Num(a.at("data_bytes"), "sent")) *
      per_worker_step;
  m.bytes_received_per_worker = (Num(b.at("data_bytes"), "received") -
                                 Num(a.at("data_bytes"), "received")) *
                                per_worker_step;
  m.control_bytes_per_worker =
      (Both(b, "control_bytes") - Both(a, "control_bytes")) * per_worker_step;
  if (b.contains("peer_bytes")) {
    const auto delta = [&](const char* group, const std::string& peer,
                           const char* key) {
      const auto count = [&](const nlohmann::json& j) {
        return j.contains(group) && j.at(group).contains(peer)
                   ? Num(j.at(group).at(peer), key)
                   : 0.0;
      };
      return (count(b) - count(a)) * per_step;
    };
    for (int s = 0; b.at("peer_bytes").contains(absl::StrCat("ps", s)); ++s) {
      const std::string peer = absl::StrCat("ps", s);
      m.shard_bytes_in.push_back(delta("peer_bytes", peer, "sent"));
      m.shard_bytes_out.push_back(delta("peer_bytes", peer, "received"));
      m.shard_bytes.push_back(m.shard_bytes_in.back() +
                              m.shard_bytes_out.back());
      const auto requests = [&](const nlohmann::json& j) {
        return j.contains("shard_requests")
                   ? Num(j.at("shard_requests"), peer.c_str())
                   : 0.0;
      };
      m.shard_requests.push_back((requests(b) - requests(a)) * per_step);
    }
  }
  m.test_accuracy = Num(summary, "test_accuracy");
  m.unique_ids_per_step = Num(summary, "unique_ids_per_step");
  m.final_loss = Num(summary, "final_loss");
  m.worker_peak_rss_mib = Num(summary, "worker_peak_rss_mib");
  return m;
}

namespace {

// What the row trained on, as ferry local was told.
std::string DatasetLabel(const BenchConfig& c) {
  if (c.dataset.empty()) return "synthetic";
  if (absl::StartsWith(c.dataset, "criteo:")) return "criteo-format CTR data";
  return c.dataset;
}

// Per-shard figures measured per logical shard, summed per shard process
// (its link): logical shard j is partition j / S of process j % S.
std::vector<double> PerShardProcess(const BenchConfig& c,
                                    const std::vector<double>& logical) {
  if (c.partitions <= 1 || c.shards <= 0 ||
      logical.size() != static_cast<size_t>(c.shards * c.partitions)) {
    return logical;
  }
  std::vector<double> sums(c.shards, 0.0);
  for (size_t j = 0; j < logical.size(); ++j) sums[j % c.shards] += logical[j];
  return sums;
}

// The physical checks of the row (client/measurement_checks.h).
nlohmann::json InvalidReasons(const BenchConfig& c, const BenchMeasurement& m) {
  MeasuredWindow w;
  w.window_seconds = m.window_seconds;
  w.work_seconds = m.work_seconds;
  w.window_steps = m.steps;
  w.window_samples = m.window_samples;
  w.samples_per_second = m.samples_per_second;
  w.compute_worker_seconds = m.compute_worker_seconds;
  w.comm_worker_seconds = m.comm_worker_seconds;
  w.workers = c.workers;
  if (absl::StatusOr<double> bw = ParseBandwidth(c.bandwidth); bw.ok()) {
    w.link_bytes_per_second = *bw;
  }
  // Per step, the busiest link in one direction: a worker's (its mean:
  // no worker's link carries less than the mean of all) or a shard
  // process's.
  double busiest =
      std::max(m.bytes_sent_per_worker, m.bytes_received_per_worker);
  for (const std::vector<double>* side :
       {&m.shard_bytes_in, &m.shard_bytes_out}) {
    for (double bytes : PerShardProcess(c, *side))
      busiest = std::max(busiest, bytes);
  }
  w.busiest_link_bytes = busiest * static_cast<double>(m.steps);
  nlohmann::json reasons = nlohmann::json::array();
  for (const std::string& r : CheckMeasurement(w)) reasons.push_back(r);
  return reasons;
}

}  // namespace

nlohmann::json RunRecord(const BenchConfig& c, const BenchMeasurement& m,
                         const CostPrediction& p) {
  const double bytes_measured =
      m.bytes_sent_per_worker + m.bytes_received_per_worker;
  const double bytes_predicted =
      static_cast<double>(p.worker.sent + p.worker.received);
  const double bytes_error = RelativeError(bytes_measured, bytes_predicted);
  const double step_error = RelativeError(m.step_seconds, p.step_seconds);
  const double comm_error =
      RelativeError(m.comm_seconds, p.exposed_comm_seconds);
  const bool emulated = c.bandwidth != "0";
  // A loopback run has no link in the model: its measured communication
  // time is what calibrates overhead_seconds for the emulated runs, so no
  // time is predicted for it (null), rather than a "prediction" of zero.
  const bool times_predicted = c.bandwidth != "0" || c.latency != "0";
  const auto predicted = [&](double v) {
    return times_predicted ? nlohmann::json(v) : nlohmann::json(nullptr);
  };
  // A DLRM has no class chance: its accuracy is a click threshold's.
  const double chance =
      c.dlrm ? 0.0 : 1.0 / std::max(1, ModelClasses(c.mlp_spec));
  nlohmann::json notes = nlohmann::json::array();
  if (std::abs(bytes_error) > 0.02) {
    notes.push_back(absl::StrFormat(
        "bytes off by %s: %s", Percent(bytes_error),
        c.consistency != "sync"
            ? "the model describes synchronous steps"
            : "unexplained: check the per-peer bytes in the run's summary"));
  }
  if (!emulated) {
    // Said once in the table's preamble (ResultsMarkdown).
  } else if (std::abs(comm_error) > 0.15 || std::abs(step_error) > 0.15) {
    const double gap_ms = 1e3 * (m.comm_seconds - p.exposed_comm_seconds);
    std::string why;
    if (c.consistency != "sync") {
      why = "the model describes synchronous steps";
    } else if (gap_ms < 0) {
      why = absl::StrFormat(
          "%.1f ms per step less exposed exchange than the model's (its link "
          "time plus %.1f ms of overhead measured by the loopback baseline)",
          -gap_ms, 1e3 * p.overhead_seconds);
    } else {
      why = absl::StrFormat(
          "%.1f ms per step more exposed exchange than the model's (its link "
          "time and %.1f ms of overhead measured by the loopback baseline)",
          gap_ms, 1e3 * p.overhead_seconds);
    }
    notes.push_back(absl::StrFormat("time off (step %s, exposed comm %s): %s",
                                    Percent(step_error), Percent(comm_error),
                                    why));
  }
  nlohmann::json shard_bytes_predicted = nlohmann::json::array();
  for (const RoleBytes& s : p.shards)
    shard_bytes_predicted.push_back(s.sent + s.received);
  // Measured per logical shard; predicted per shard process (its link).
  const std::vector<double> shard_bytes = PerShardProcess(c, m.shard_bytes);
  const nlohmann::json invalid = InvalidReasons(c, m);
  // A script's model is scored only by the script (job.evaluate).
  const bool scripted = !c.worker_command.empty();
  // What a worker holds for the model (client/memory_model.h; the lab's
  // optimizer is ferry's default, momentum); not modelled for a DLRM.
  nlohmann::json worker_state_mib = nullptr;
  if (!c.dlrm) {
    const MemoryPrediction memory =
        PredictMemory({.params = p.params,
                       .optimizer_state_buffers = 1,
                       .workers = c.workers,
                       .shards = std::max(1, c.shards)});
    const int64_t bytes =
        c.mode == "ring"           ? memory.ring_member
        : c.mode == "ring-sharded" ? memory.sharded_ring_member
        : c.mode == "ps-colocated" ? memory.ps_worker + memory.ps_shard
                                   : memory.ps_worker;
    worker_state_mib = static_cast<double>(bytes) / (1 << 20);
  }
  return {
      {"name", c.Name()},
      {"mode", c.mode},
      {"model", c.model},
      {"mlp_spec", c.mlp_spec},
      {"dataset", DatasetLabel(c)},
      {"trained", scripted ? std::string("the worker command's model, on "
                                         "its data")
                           : absl::StrCat(c.mlp_spec, " on ", DatasetLabel(c))},
      {"model_params", p.params},
      {"workers", c.workers},
      {"shards", c.shards},
      {"partitions", c.partitions},
      {"consistency", c.consistency},
      {"compression", c.compression},
      {"link_bandwidth", c.bandwidth},
      {"link_latency", c.latency},
      {"global_batch", c.batch},
      {"steps_measured", m.steps},
      {"bytes_per_step_per_worker_measured", bytes_measured},
      {"bytes_per_step_per_worker_predicted", bytes_predicted},
      {"bytes_sent_per_step_per_worker_measured", m.bytes_sent_per_worker},
      {"bytes_sent_per_step_per_worker_predicted", p.worker.sent},
      {"bytes_error", bytes_error},
      {"control_bytes_per_step_per_worker", m.control_bytes_per_worker},
      {"step_seconds_measured", m.step_seconds},
      {"window_seconds", m.window_seconds},
      {"window_samples", m.window_samples},
      {"samples_per_second", m.samples_per_second},
      {"step_seconds_predicted", predicted(p.step_seconds)},
      {"step_error", predicted(step_error)},
      {"time_model", times_predicted ? "link model + overhead_seconds"
                                     : "none (loopback baseline: calibrates "
                                       "overhead_seconds)"},
      {"compute_seconds_per_step", m.compute_seconds},
      {"comm_seconds_measured", m.comm_seconds},
      {"comm_seconds_predicted", predicted(p.exposed_comm_seconds)},
      {"comm_seconds_total_predicted", predicted(p.comm_seconds)},
      {"comm_error", predicted(comm_error)},
      {"overhead_seconds", p.overhead_seconds},
      {"bottleneck_predicted", p.bottleneck},
      {"shard_bytes_per_step_measured", shard_bytes},
      {"shard_bytes_per_step_predicted", shard_bytes_predicted},
      {"shard_requests_per_step_measured", m.shard_requests},
      {"unique_ids_per_step", m.unique_ids_per_step},
      {"full_table_rows", c.full_table_rows},
      {"test_accuracy", scripted && m.test_accuracy == 0
                            ? nlohmann::json(nullptr)  // the script scores
                            : nlohmann::json(m.test_accuracy)},
      {"test_accuracy_chance", chance},
      {"final_loss", m.final_loss},
      {"worker_peak_rss_mib", m.worker_peak_rss_mib},
      {"worker_state_mib_predicted", worker_state_mib},
      {"notes", notes},
      {"invalid", invalid}};
}

bool IsValidRow(const nlohmann::json& run) {
  return !run.contains("invalid") || run.at("invalid").empty();
}

std::string ResultsCsv(const std::vector<nlohmann::json>& runs) {
  static constexpr const char* kColumns[] = {
      "name",
      "mode",
      "model",
      "trained",
      "model_params",
      "workers",
      "shards",
      "partitions",
      "consistency",
      "compression",
      "link_bandwidth",
      "link_latency",
      "steps_measured",
      "bytes_per_step_per_worker_measured",
      "bytes_per_step_per_worker_predicted",
      "bytes_error",
      "step_seconds_measured",
      "step_seconds_predicted",
      "step_error",
      "compute_seconds_per_step",
      "comm_seconds_measured",
      "comm_seconds_predicted",
      "comm_error",
      "overhead_seconds",
      "window_seconds",
      "window_samples",
      "samples_per_second",
      "test_accuracy",
      "worker_peak_rss_mib",
      "worker_state_mib_predicted",
      "valid"};
  std::string out;
  for (const char* c : kColumns)
    absl::StrAppend(&out, out.empty() ? "" : ",", c);
  out += "\n";
  for (const nlohmann::json& r : runs) {
    std::string row;
    for (const char* c : kColumns) {
      const nlohmann::json v = std::string(c) == "valid"
                                   ? nlohmann::json(IsValidRow(r))
                               : r.contains(c) ? r.at(c)
                                               : nlohmann::json(0);
      absl::StrAppend(&row, row.empty() ? "" : ",",
                      v.is_string() ? v.get<std::string>()
                      : v.is_null() ? ""  // not predicted
                                    : v.dump());
    }
    out += row + "\n";
  }
  return out;
}

std::string ResultsMarkdown(const std::vector<nlohmann::json>& runs) {
  std::string out =
      "Bytes are payload bytes per step per worker, sent + received, to/from "
      "shards (PS) or ring peers. Times are per step, from the steps' own "
      "clocks: the window runs from the end of the first measured step to "
      "the end of the last, each step ending when its last worker's "
      "exchange did (`ended_seconds` in metrics.jsonl); samples/s is the "
      "window's samples over its span. Predictions for emulated links "
      "include the overhead term measured by the run's loopback baseline "
      "(`overhead_seconds` in results.json; the baselines are the rows "
      "with link `loopback`). A loopback row has no link in the model: its "
      "times are not predicted (—), they calibrate the overhead of the "
      "emulated rows. Held-out acc is the test accuracy after the run's "
      "few steps, on samples it did not train on: a check that training "
      "moved, not a result; a run still at chance level says so. S 4x8: 4 "
      "shard processes of 8 partitions each. A row marked INVALID broke a "
      "physical check (exposed comm or compute longer than the step, "
      "faster than its link, samples/s x window not the samples applied): "
      "its reasons are listed below the table, and it is left out of the "
      "error summary.\n\n"
      "| mode | trained | W | S | consistency | compression | link | "
      "bytes/step/worker measured | predicted | err | step s measured | "
      "predicted | err | compute s | exposed comm s measured | predicted | "
      "samples/s | held-out acc | worker peak MiB (model's state) |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
      "---|---|\n";
  const auto mb = [](const nlohmann::json& v) {
    return absl::StrFormat("%.3f MB", v.get<double>() / 1e6);
  };
  // "412 (385)": the measured peak, the modelled state in parentheses.
  const auto memory = [](const nlohmann::json& r) {
    const double peak = r.value("worker_peak_rss_mib", 0.0);
    const nlohmann::json state =
        r.value("worker_state_mib_predicted", nlohmann::json());
    return absl::StrCat(peak > 0 ? absl::StrFormat("%.0f", peak) : "—",
                        state.is_number()
                            ? absl::StrFormat(" (%.0f)", state.get<double>())
                            : "");
  };
  const auto sec = [](const nlohmann::json& v) {
    return v.is_null() ? std::string("—")
                       : absl::StrFormat("%.4f", v.get<double>());
  };
  const auto pct = [](const nlohmann::json& v) {
    return v.is_null() ? std::string("n/a (no link model)")
                       : Percent(v.get<double>());
  };
  // Accuracy below twice chance (ten classes: 0.2) did not learn yet.
  const auto acc = [](const nlohmann::json& r) {
    if (r.at("test_accuracy").is_null()) return std::string("— (not scored)");
    const double a = r.at("test_accuracy").get<double>();
    const double chance = r.value("test_accuracy_chance", 0.0);
    if (a < 2 * chance) return absl::StrFormat("≈ chance (%.2f)", a);
    return absl::StrFormat("%.4f", a);
  };
  std::string notes, invalid;
  int predicted = 0, within = 0;
  for (const nlohmann::json& r : runs) {
    const std::string link = r.at("link_bandwidth").get<std::string>() == "0"
                                 ? "loopback"
                                 : r.at("link_bandwidth").get<std::string>() +
                                       " " +
                                       r.at("link_latency").get<std::string>();
    const bool valid = IsValidRow(r);
    // "fashion-mlp (784-256-128-10 on fashion-mnist)"; a model given as
    // its spec is not repeated.
    const std::string model = r.at("model").get<std::string>();
    std::string trained = model;
    if (r.contains("trained")) {
      trained = r.value("mlp_spec", "") == model
                    ? r.at("trained").get<std::string>()
                    : absl::StrCat(model, " (",
                                   r.at("trained").get<std::string>(), ")");
    }
    absl::StrAppend(
        &out, "| ", valid ? "" : "**INVALID** ",
        r.at("mode").get<std::string>(), " | ", trained, " | ",
        r.at("workers").dump(), " | ", r.at("shards").dump(),
        r.value("partitions", 1) > 1
            ? absl::StrCat("x", r.value("partitions", 1))
            : std::string(),
        " | ", r.at("consistency").get<std::string>(), " | ",
        r.at("compression").get<std::string>(), " | ", link, " | ",
        mb(r.at("bytes_per_step_per_worker_measured")), " | ",
        mb(r.at("bytes_per_step_per_worker_predicted")), " | ",
        pct(r.at("bytes_error")), " | ", sec(r.at("step_seconds_measured")),
        " | ", sec(r.at("step_seconds_predicted")), " | ",
        pct(r.at("step_error")), " | ", sec(r.at("compute_seconds_per_step")),
        " | ", sec(r.at("comm_seconds_measured")), " | ",
        sec(r.at("comm_seconds_predicted")), " | ",
        absl::StrFormat("%.0f", r.value("samples_per_second", 0.0)), " | ",
        acc(r), " | ", memory(r), " |\n");
    for (const auto& n : r.at("notes")) {
      absl::StrAppend(&notes, "- `", r.at("name").get<std::string>(),
                      "`: ", n.get<std::string>(), "\n");
    }
    if (!valid) {
      for (const auto& reason : r.at("invalid")) {
        absl::StrAppend(&invalid, "- `", r.at("name").get<std::string>(),
                        "`: ", reason.get<std::string>(), "\n");
      }
    } else if (r.at("step_error").is_number()) {
      ++predicted;
      if (std::abs(r.at("step_error").get<double>()) <= 0.15) ++within;
    }
  }
  if (predicted > 0) {
    absl::StrAppend(&out, "\nStep time within ±15 % of the model: ", within,
                    " of ", predicted,
                    " valid emulated rows (INVALID rows not counted).\n");
  }
  if (!invalid.empty())
    absl::StrAppend(&out, "\nINVALID rows (left out of every summary):\n\n",
                    invalid);
  if (!notes.empty())
    absl::StrAppend(&out, "\nWhere measurement and model differ:\n\n", notes);
  return out;
}

}  // namespace ferry

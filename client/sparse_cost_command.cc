#include "client/sparse_cost_command.h"

#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/sparse_cost_model.h"
#include "common/status_macros.h"
#include "data/ctr_generator.h"
#include "model/dlrm_spec.h"
#include "nlohmann/json.hpp"

namespace ferry {
namespace {

std::string Count(double v) {
  const long long n = std::llround(v);
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

absl::StatusOr<std::vector<double>> ParseNumbers(const std::string& text,
                                                 const std::string& flag) {
  std::vector<double> out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    double v = 0;
    if (!absl::SimpleAtod(part, &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": '", part, "' is not a number"));
    }
    out.push_back(v);
  }
  return out;
}

struct SparseSetup {
  SparseCostInput input;
  int dim = 0;
  int64_t fields = 0;
};

absl::StatusOr<SparseSetup> ToSparseInput(const CostFlags& f) {
  if (f.compression != "none" || f.colocated) {
    return absl::InvalidArgumentError(
        "--compression and --colocated are not modelled for DLRM models");
  }
  ASSIGN_OR_RETURN(const DlrmSpec spec, ResolveDlrmSpec(f.model));
  ASSIGN_OR_RETURN(const ParameterLayout layout, DlrmParameterLayout(spec));
  SparseSetup s;
  SparseCostInput& in = s.input;
  in.dense_tensor_sizes = layout.TensorSizes();
  in.embedding_dim = spec.embedding_dim;
  std::vector<int64_t> vocab = CriteoLikeVocabSizes();
  if (!f.vocab_sizes.empty()) {
    vocab.clear();
    for (absl::string_view part : absl::StrSplit(f.vocab_sizes, ',')) {
      int64_t v = 0;
      if (!absl::SimpleAtoi(part, &v) || v < 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--vocab-sizes: '", part, "' is not a table size >= 1"));
      }
      vocab.push_back(v);
    }
  }
  if (static_cast<int64_t>(vocab.size()) != spec.num_fields) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model has ", spec.num_fields, " fields (embedding tables) but ",
        vocab.size(), " vocabulary sizes are given",
        f.vocab_sizes.empty() ? " by default (Criteo's); give --vocab-sizes"
                              : ""));
  }
  const std::vector<double> empty =
      CtrGeneratorEmptyRates(f.data_seed, spec.num_fields);
  for (int t = 0; t < spec.num_fields; ++t)
    in.tables.push_back({vocab[t], f.no_empty ? 0.0 : empty[t]});
  in.zipf_exponent = f.zipf;
  in.global_batch = f.batch;
  in.workers = f.workers;
  in.shards = f.shards;
  CostInput times;
  RETURN_IF_ERROR(ParseCostTimes(f, times));
  in.bandwidth_bytes_per_second = times.bandwidth_bytes_per_second;
  in.latency_seconds = times.latency_seconds;
  in.compute_seconds = times.compute_seconds;
  in.overhead_seconds = times.overhead_seconds;
  in.bucket_elements = f.bucket_elements;
  in.max_chunk_elements = f.max_chunk_elements;
  in.measured_unique_ids = f.unique_ids;
  s.dim = spec.embedding_dim;
  s.fields = spec.num_fields;
  return s;
}

nlohmann::json ModeJson(const SparseModeCost& m) {
  return {{"sent", m.sent()},
          {"received", m.received()},
          {"bytes_per_step_per_worker", m.bytes()},
          {"dense_bytes", m.dense_sent + m.dense_received},
          {"sparse_bytes", m.sparse_sent + m.sparse_received},
          {"rows_moved", m.rows_moved},
          {"dense_seconds", m.dense_seconds},
          {"sparse_seconds", m.sparse_seconds},
          {"update_seconds", m.update_seconds},
          {"step_seconds", m.step_seconds}};
}

nlohmann::json PredictionJson(const SparsePrediction& p, bool by_time) {
  nlohmann::json modes;
  for (SparseMode m : kSparseModes)
    modes[SparseModeName(m)] = ModeJson(p.mode(m));
  return {{"dense_params", p.dense_params},
          {"table_rows", p.table_rows},
          {"lookups_per_worker", p.lookups_per_worker},
          {"unique_ids_per_worker", p.unique_ids_per_worker},
          {"unique_ids_per_step", p.unique_ids_all_workers},
          {"unique_ids_union", p.unique_ids_union},
          {"unique_ids_per_table", p.unique_per_table},
          {"modes", modes},
          {"fastest", SparseModeName(FastestSparseMode(p, by_time))}};
}

std::string AxisWords(SparseSweepAxis axis) {
  switch (axis) {
    case SparseSweepAxis::kBatch:
      return "global batch";
    case SparseSweepAxis::kTable:
      return "table size (every vocabulary x the factor)";
    case SparseSweepAxis::kZipf:
      return "Zipf exponent of the ids";
  }
  return "?";
}

std::string AxisValue(SparseSweepAxis axis, double v, int64_t rows) {
  switch (axis) {
    case SparseSweepAxis::kBatch:
      return Count(v);
    case SparseSweepAxis::kTable:
      return absl::StrFormat("x%.3g (%s rows)", v, Count(rows));
    case SparseSweepAxis::kZipf:
      return absl::StrFormat("%.3f", v);
  }
  return "?";
}

void PrintSweep(const SparseSweep& sweep) {
  const bool table = sweep.axis == SparseSweepAxis::kTable;
  std::printf("sweep: %s varied, everything else as above; fastest by %s\n\n",
              AxisWords(sweep.axis).c_str(),
              sweep.by_time ? "step time" : "bytes per worker (no link)");
  std::printf(
      "%-8s %12s %11s | %10s %10s %10s %10s | %11s %11s %11s %11s | %s\n",
      SparseSweepAxisName(sweep.axis), table ? "rows" : "lookups/w", "unique/w",
      "ps", "all-gather", "all-reduce", "hybrid", "ps", "all-gather",
      "all-reduce", "hybrid", "fastest");
  std::printf("%-8s %12s %11s | %43s | %47s |\n", "", "", "",
              "bytes per step per worker", "step time");
  for (const SparseSweepPoint& point : sweep.points) {
    const SparsePrediction& p = point.prediction;
    std::printf(
        "%-8s %12s %11s | %10s %10s %10s %10s | %11s %11s %11s %11s | %s\n",
        sweep.axis == SparseSweepAxis::kZipf
            ? absl::StrFormat("%.2f", point.value).c_str()
        : table ? absl::StrFormat("x%.3g", point.value).c_str()
                : Count(point.value).c_str(),
        table ? Count(static_cast<double>(p.table_rows)).c_str()
              : Count(static_cast<double>(p.lookups_per_worker)).c_str(),
        absl::StrFormat("%.1f", p.unique_ids_per_worker).c_str(),
        FormatBytes(p.mode(SparseMode::kPs).bytes()).c_str(),
        FormatBytes(p.mode(SparseMode::kAllGather).bytes()).c_str(),
        FormatBytes(p.mode(SparseMode::kAllReduce).bytes()).c_str(),
        FormatBytes(p.mode(SparseMode::kHybrid).bytes()).c_str(),
        FormatMillis(p.mode(SparseMode::kPs).step_seconds).c_str(),
        FormatMillis(p.mode(SparseMode::kAllGather).step_seconds).c_str(),
        FormatMillis(p.mode(SparseMode::kAllReduce).step_seconds).c_str(),
        FormatMillis(p.mode(SparseMode::kHybrid).step_seconds).c_str(),
        SparseModeName(point.fastest));
  }
  std::printf("\ncrossovers (%s, searched %s .. %s):\n",
              AxisWords(sweep.axis).c_str(),
              AxisValue(sweep.axis, sweep.points.front().value,
                        sweep.points.front().prediction.table_rows)
                  .c_str(),
              AxisValue(sweep.axis, sweep.points.back().value,
                        sweep.points.back().prediction.table_rows)
                  .c_str());
  if (sweep.crossovers.empty()) {
    std::printf("  none: the modes keep their order over the whole range\n");
  }
  for (const SparseCrossoverPoint& c : sweep.crossovers) {
    std::printf("  %s %s: %s faster below, %s from there on\n",
                SparseSweepAxisName(sweep.axis),
                AxisValue(sweep.axis, c.value, c.table_rows).c_str(),
                SparseModeName(c.below), SparseModeName(c.above));
  }
}

nlohmann::json SweepJson(const SparseSweep& sweep) {
  nlohmann::json points = nlohmann::json::array();
  for (const SparseSweepPoint& point : sweep.points) {
    nlohmann::json j = PredictionJson(point.prediction, sweep.by_time);
    j["value"] = point.value;
    points.push_back(j);
  }
  nlohmann::json crossovers = nlohmann::json::array();
  for (const SparseCrossoverPoint& c : sweep.crossovers) {
    crossovers.push_back({{"value", c.value},
                          {"table_rows", c.table_rows},
                          {"faster_below", SparseModeName(c.below)},
                          {"faster_from", SparseModeName(c.above)}});
  }
  return {{"axis", SparseSweepAxisName(sweep.axis)},
          {"varied", AxisWords(sweep.axis)},
          {"fastest_by", sweep.by_time ? "step_seconds" : "bytes"},
          {"points", points},
          {"crossovers", crossovers}};
}

}  // namespace

absl::StatusOr<SparseCostInput> SparseCostInputFromFlags(const CostFlags& f) {
  ASSIGN_OR_RETURN(SparseSetup setup, ToSparseInput(f));
  return setup.input;
}

absl::Status RunSparseCost(const CostFlags& f) {
  ASSIGN_OR_RETURN(const SparseSetup setup, ToSparseInput(f));
  const SparseCostInput& in = setup.input;
  if (!f.sweep.empty() && f.unique_ids >= 0) {
    return absl::InvalidArgumentError(
        "--unique-ids holds for one batch and table: not with --sweep");
  }
  if (f.sweep.empty() && !f.sweep_values.empty()) {
    return absl::InvalidArgumentError("--sweep-values needs --sweep");
  }
  ASSIGN_OR_RETURN(const SparsePrediction p, PredictSparseStep(in));
  const bool by_time =
      in.bandwidth_bytes_per_second > 0 || in.latency_seconds > 0;
  std::optional<SparseSweep> sweep;
  if (!f.sweep.empty()) {
    ASSIGN_OR_RETURN(const SparseSweepAxis axis, ParseSparseSweepAxis(f.sweep));
    std::vector<double> values = DefaultSparseSweepValues(axis, in);
    if (!f.sweep_values.empty()) {
      ASSIGN_OR_RETURN(values, ParseNumbers(f.sweep_values, "--sweep-values"));
    }
    ASSIGN_OR_RETURN(sweep, SweepSparse(in, axis, values));
  }
  const int64_t share_max = (in.global_batch + in.workers - 1) / in.workers;
  const int64_t share_min = in.global_batch / in.workers;
  if (f.json) {
    nlohmann::json out = {
        {"model", f.model},
        {"embedding_dim", setup.dim},
        {"vocab_sizes", nlohmann::json::array()},
        {"empty_rates", nlohmann::json::array()},
        {"zipf_exponent", in.zipf_exponent},
        {"global_batch", in.global_batch},
        {"workers", in.workers},
        {"shards", in.shards},
        {"bandwidth_bytes_per_second", in.bandwidth_bytes_per_second},
        {"latency_seconds", in.latency_seconds},
        {"compute_seconds", in.compute_seconds},
        {"overhead_seconds", in.overhead_seconds},
        {"unique_ids_source", in.measured_unique_ids >= 0
                                  ? "measured (--unique-ids)"
                                  : "expected from the distribution"}};
    for (const ZipfTable& t : in.tables) {
      out["vocab_sizes"].push_back(t.vocab);
      out["empty_rates"].push_back(t.empty_rate);
    }
    out["prediction"] = PredictionJson(p, by_time);
    if (sweep.has_value()) out["sweep"] = SweepJson(*sweep);
    std::printf("%s\n", out.dump(2).c_str());
    return absl::OkStatus();
  }
  std::printf(
      "model %s: %s dense parameters, %lld embedding tables of dim %d (%s "
      "rows), ids Zipf %g%s\n",
      f.model.c_str(), Count(static_cast<double>(p.dense_params)).c_str(),
      static_cast<long long>(setup.fields), setup.dim,
      Count(static_cast<double>(p.table_rows)).c_str(), in.zipf_exponent,
      f.no_empty ? ""
                 : absl::StrCat(" + empty values as ferry data ctr --seed ",
                                f.data_seed)
                       .c_str());
  std::printf(
      "global batch %lld (%s per worker), %d workers, %d shards, link %s "
      "(%s), latency %s, compute %s, overhead %s\n\n",
      static_cast<long long>(in.global_batch),
      share_max == share_min ? Count(static_cast<double>(share_max)).c_str()
                             : absl::StrCat(share_min, "-", share_max).c_str(),
      in.workers, in.shards, f.bandwidth.c_str(),
      in.bandwidth_bytes_per_second > 0
          ? (FormatBytes(in.bandwidth_bytes_per_second) + "/s").c_str()
          : "unlimited",
      f.latency.c_str(), f.compute.c_str(), f.overhead.c_str());
  std::printf(
      "unique ids per step (%s): %.1f per worker of %s lookups, %.1f summed "
      "over workers\n  (ferry local's unique_ids_per_step), %.1f distinct in "
      "the global batch\n\n",
      in.measured_unique_ids >= 0 ? "measured, --unique-ids" : "expected",
      p.unique_ids_per_worker,
      Count(static_cast<double>(p.lookups_per_worker)).c_str(),
      p.unique_ids_all_workers, p.unique_ids_union);
  std::printf("%-10s %12s %11s %11s %12s %11s %11s %11s %11s\n", "mode",
              "rows moved", "sent/worker", "recv/worker", "bytes/worker",
              "dense", "sparse", "updates", "step");
  for (SparseMode mode : kSparseModes) {
    const SparseModeCost& m = p.mode(mode);
    std::printf(
        "%-10s %12s %11s %11s %12s %11s %11s %11s %11s\n", SparseModeName(mode),
        Count(m.rows_moved).c_str(), FormatBytes(m.sent()).c_str(),
        FormatBytes(m.received()).c_str(), FormatBytes(m.bytes()).c_str(),
        FormatMillis(m.dense_seconds).c_str(),
        FormatMillis(m.sparse_seconds).c_str(),
        FormatMillis(m.update_seconds).c_str(),
        FormatMillis(m.step_seconds).c_str());
  }
  const SparseMode best = FastestSparseMode(p, by_time);
  const auto cost = [&](SparseMode m) {
    return by_time ? p.mode(m).step_seconds : p.mode(m).bytes();
  };
  std::string others;
  for (SparseMode m : kSparseModes) {
    if (m == best) continue;
    absl::StrAppend(
        &others, others.empty() ? "" : ", ",
        absl::StrFormat("%.2fx %s", cost(m) / std::max(cost(best), 1e-300),
                        SparseModeName(m)));
  }
  std::printf("\nfastest: %s (by %s; the others take %s)\n",
              SparseModeName(best),
              by_time ? "step time" : "bytes: no link given", others.c_str());
  std::printf(
      "\nps:         dense push + pull; per unique id 8 B up + 4d B down "
      "(row pull), 8 + 4d B up (push)\n"
      "all-gather: dense ring all-reduce; per unique id (8 + 4d) B x (W-1) "
      "each way\n"
      "all-reduce: dense ring all-reduce; every table's rows x 4d B x "
      "2(W-1)/W each way\n"
      "hybrid:     dense ring all-reduce; rows as ps (their push overlaps "
      "the all-reduce)\n");
  if (sweep.has_value()) {
    std::printf("\n");
    PrintSweep(*sweep);
  }
  return absl::OkStatus();
}

}  // namespace ferry

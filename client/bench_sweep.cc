// The sweep of `ferry bench compare` (client/bench_compare.h): the runs its
// flags cross, and the loopback baselines they are calibrated against.
#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/bench_compare.h"
#include "client/cost_model.h"
#include "common/gradient_codec.h"
#include "common/link_shaper.h"
#include "common/status_macros.h"
#include "data/data_source.h"
#include "model/dlrm_spec.h"
#include "model/model_presets.h"

namespace ferry {

// Where DLRM runs read their CTR data (absolute: ferry local's coordinator
// resolves it).
std::string CtrDataDir(const BenchCompareFlags& f) {
  const std::string dir =
      f.ctr_data.empty() ? f.out_dir + "/ctr-data" : f.ctr_data;
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(dir, error);
  return error ? dir : absolute.string();
}

BenchCompareFlags QuickPreset(BenchCompareFlags f) {
  f.models = {"fashion-mlp"};
  f.modes = {"ps", "ring"};
  f.workers = {2};
  f.shards = {1, 2};
  f.consistency = {"sync"};
  f.compression = {"none", "fp16"};
  f.bandwidths = {"1Gbit"};
  f.latencies = {"50us"};
  f.steps = 50;
  f.warmup_steps = 5;
  return f;
}

bool ModeFitsModel(const std::string& mode, bool dlrm) {
  if (mode == "ps" || mode == "ring") return true;
  if (mode == "ps-colocated" || mode == "ring-sharded") return !dlrm;
  return dlrm && (mode == "hybrid" || mode == "ring-full");
}

bool IsBaseline(const BenchConfig& c) {
  return c.bandwidth == "0" && c.latency == "0";
}

BenchConfig BaselineOf(const BenchConfig& c) {
  BenchConfig b = c;
  b.bandwidth = "0";
  b.latency = "0";
  return b;
}

std::vector<BenchConfig> WithBaselines(const std::vector<BenchConfig>& sweep) {
  std::vector<BenchConfig> out;
  std::set<std::string> names;
  const auto add = [&](const BenchConfig& c) {
    if (names.insert(c.Name()).second) out.push_back(c);
  };
  for (const BenchConfig& c : sweep) {
    if (!IsBaseline(c)) add(BaselineOf(c));
    add(c);
  }
  return out;
}

namespace {

// Every config of `configs` once per value of an axis (`set` writes the
// value), in the order of nested loops: configs outer, values inner.
template <typename T, typename Set>
std::vector<BenchConfig> Cross(const std::vector<BenchConfig>& configs,
                               const std::vector<T>& values, Set set) {
  std::vector<BenchConfig> out;
  out.reserve(configs.size() * values.size());
  for (const BenchConfig& c : configs) {
    for (const T& v : values) {
      out.push_back(c);
      set(out.back(), v);
    }
  }
  return out;
}

// The axes' values that do not depend on the model or mode.
absl::Status CheckSweepAxes(const BenchCompareFlags& f) {
  for (const std::string& compression : f.compression) {
    RETURN_IF_ERROR(ParseCompression(compression, true).status());
  }
  for (const std::string& bandwidth : f.bandwidths) {
    RETURN_IF_ERROR(ParseBandwidth(bandwidth).status());
  }
  for (const std::string& latency : f.latencies) {
    RETURN_IF_ERROR(ParseLatency(latency).status());
  }
  const auto below = [](const std::vector<int>& v, int least) {
    return std::any_of(v.begin(), v.end(), [&](int x) { return x < least; });
  };
  if (below(f.workers, 1) || below(f.shards, 1) || below(f.partitions, 1) ||
      std::any_of(f.partitions.begin(), f.partitions.end(),
                  [](int k) { return k > 64; })) {
    return absl::InvalidArgumentError(
        "worker and shard counts must be >= 1, partitions 1..64");
  }
  return absl::OkStatus();
}

// A dense model's data as ferry local takes it ("" for synthetic data of
// the model's shape): --dataset, where auto picks fashion-mnist when the
// model takes its images and the data is installed.
absl::StatusOr<std::string> DenseDataset(const std::string& choice,
                                         const std::string& spec) {
  if (choice == "synthetic") return std::string();
  ASSIGN_OR_RETURN(const ModelDef def, ResolveModelSpec(spec));
  const absl::Status fits = CheckModelFitsDataset(def, "fashion-mnist", "");
  if (fits.ok()) return std::string("fashion-mnist");
  if (choice == "auto") return std::string();
  return absl::InvalidArgumentError(absl::StrCat(
      "--dataset fashion-mnist with model ", spec, ": ", fits.message()));
}

}  // namespace

absl::StatusOr<std::vector<BenchConfig>> ExpandSweep(
    const BenchCompareFlags& in) {
  BenchCompareFlags f = in.quick ? QuickPreset(in) : in;
  RETURN_IF_ERROR(CheckSweepAxes(f));
  const bool scripted = !f.worker_command.empty();
  if (scripted) {
    if (!absl::StrContains(f.worker_command, "{samples}")) {
      return absl::InvalidArgumentError(
          "--worker-command: put {samples} where the script takes its "
          "dataset size (the run's job has exactly that many samples), e.g. "
          "\"python3 train.py --samples {samples} --lr {lr}\"");
    }
    if (f.model_name.empty() ||
        f.model_name.find_first_of("/ ") != std::string::npos) {
      return absl::InvalidArgumentError(
          "--model-name: a name without spaces or slashes");
    }
    f.models = {f.model_name};
  }
  std::vector<BenchConfig> out;
  for (const std::string& model : f.models) {
    const bool dlrm = !scripted && IsDlrmModelText(model);
    std::string spec = model;
    if (scripted) {
      spec = "external";
    } else if (dlrm) {
      RETURN_IF_ERROR(ResolveDlrmSpec(model).status());
    } else {
      ASSIGN_OR_RETURN(spec, ResolveModel(model));
    }
    if (dlrm && std::any_of(f.compression.begin(), f.compression.end(),
                            [](const std::string& c) { return c != "none"; })) {
      return absl::InvalidArgumentError(
          "--compression: the sparse cost model does not model compression; "
          "DLRM runs take none");
    }
    for (const std::string& mode : f.modes) {
      if (!ModeFitsModel(mode, dlrm)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "mode '", mode, "' with model ", model, ": expected ps or ring",
            dlrm ? ", hybrid or ring-full"
                 : ", ps-colocated, ring-sharded (hybrid and ring-full: "
                   "DLRM)"));
      }
      BenchConfig base;
      base.model = model;
      base.mlp_spec = spec;
      base.mode = mode;
      base.dlrm = dlrm;
      base.partitions = 1;
      base.consistency = "sync";
      base.batch = f.batch;
      base.warmup_steps = f.warmup_steps;
      base.steps = f.steps;
      if (scripted) {
        base.worker_command = f.worker_command;  // its dataset: LocalArgs
      } else if (!dlrm) {
        ASSIGN_OR_RETURN(base.dataset, DenseDataset(f.dataset, spec));
      } else {
        base.dataset = absl::StrCat("criteo:", CtrDataDir(f));
        if (mode == "ring-full") base.full_table_rows = f.full_table_rows;
      }
      std::vector<BenchConfig> runs = {base};
      runs =
          Cross(runs, f.workers, [](BenchConfig& c, int w) { c.workers = w; });
      if (mode == "ps" || mode == "hybrid") {
        runs =
            Cross(runs, f.shards, [](BenchConfig& c, int s) { c.shards = s; });
      } else if (mode == "ps-colocated") {
        for (BenchConfig& c : runs) c.shards = c.workers;
      }
      // Partitions are the dense PS's (hybrid's dense layers are in the
      // ring; the sparse cost model has no partitions), and only PS has
      // other consistencies than the ring's sync.
      if (IsPsMode(mode) && !dlrm) {
        runs = Cross(runs, f.partitions,
                     [](BenchConfig& c, int k) { c.partitions = k; });
      }
      if (IsPsMode(mode)) {
        runs = Cross(
            runs, f.consistency,
            [](BenchConfig& c, const std::string& v) { c.consistency = v; });
      }
      runs = Cross(
          runs, f.compression,
          [](BenchConfig& c, const std::string& v) { c.compression = v; });
      runs =
          Cross(runs, f.bandwidths,
                [](BenchConfig& c, const std::string& v) { c.bandwidth = v; });
      runs = Cross(runs, f.latencies,
                   [](BenchConfig& c, const std::string& v) { c.latency = v; });
      out.insert(out.end(), runs.begin(), runs.end());
    }
  }
  return out;
}

}  // namespace ferry

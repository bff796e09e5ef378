#include "client/cost_command.h"

#include <cmath>
#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cost_model.h"
#include "client/memory_model.h"
#include "client/pipeline_cost_command.h"
#include "client/sparse_cost_command.h"
#include "common/link_shaper.h"
#include "common/optimizer_config.h"
#include "common/status_macros.h"
#include "model/dlrm_spec.h"
#include "nlohmann/json.hpp"

namespace ferry {
namespace {

// The measured compute per worker step of a ferry local --summary-json.
absl::StatusOr<double> MeasuredCompute(const std::string& summary_path) {
  std::FILE* file = std::fopen(summary_path.c_str(), "rb");
  if (file == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("--compute-from ", summary_path, ": cannot open it"));
  }
  std::string text;
  char buffer[1 << 16];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), file)) > 0;)
    text.append(buffer, n);
  std::fclose(file);
  const nlohmann::json summary = nlohmann::json::parse(text, nullptr, false);
  constexpr char kKey[] = "window_compute_seconds_per_worker_step";
  if (summary.is_discarded() || !summary.is_object() ||
      !summary.contains(kKey) || !summary[kKey].is_number()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--compute-from ", summary_path,
                     ": not a ferry local --summary-json with ", kKey));
  }
  const double seconds = summary[kKey].get<double>();
  if (!std::isfinite(seconds) || seconds <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--compute-from ", summary_path, ": ", kKey, " is ",
                     seconds, " (the job measured no compute)"));
  }
  return seconds;
}

nlohmann::json ToJson(const CostPrediction& p) {
  nlohmann::json shards = nlohmann::json::array();
  for (const RoleBytes& s : p.shards) {
    shards.push_back({{"sent", s.sent},
                      {"received", s.received},
                      {"messages", s.messages_sent}});
  }
  return {{"mode", p.mode == CostMode::kPs ? "ps" : "ring"},
          {"params", p.params},
          {"bytes_per_step_per_worker",
           {{"sent", p.worker.sent}, {"received", p.worker.received}}},
          {"bytes_per_step_per_shard", shards},
          {"comm_seconds", p.comm_seconds},
          {"exposed_comm_seconds", p.exposed_comm_seconds},
          {"step_seconds", p.step_seconds},
          {"bottleneck", p.bottleneck}};
}

absl::StatusOr<CostInput> ToInput(const CostFlags& f) {
  CostInput in;
  ASSIGN_OR_RETURN(const std::string spec, ResolveModel(f.model));
  ASSIGN_OR_RETURN(in.tensor_sizes, ModelTensorSizes(spec));
  RETURN_IF_ERROR(ParseCostTimes(f, in));
  ASSIGN_OR_RETURN(in.compression,
                   ParseCompression(f.compression, /*error_feedback=*/true));
  in.workers = f.workers;
  in.shards = f.shards;
  in.partitions = f.partitions;
  in.colocated = f.colocated;
  in.bucket_elements = f.bucket_elements;
  in.max_chunk_elements = f.max_chunk_elements;
  in.pack_chunks = f.pack_chunks;
  return in;
}

// Flags that only a DLRM takes, given with another model.
absl::Status CheckDenseFlags(const CostFlags& f) {
  const CostFlags defaults;
  if (!f.vocab_sizes.empty() || f.zipf != defaults.zipf ||
      f.batch != defaults.batch || f.data_seed != defaults.data_seed ||
      f.no_empty || f.unique_ids >= 0 || !f.sweep.empty() ||
      !f.sweep_values.empty()) {
    return absl::InvalidArgumentError(
        "--vocab-sizes, --zipf, --batch, --data-seed, --no-empty, "
        "--unique-ids and --sweep describe sparse models: they need --model "
        "dlrm (or a DLRM JSON)");
  }
  return absl::OkStatus();
}

absl::Status Run(const CostFlags& f) {
  if (f.pipeline.stages > 1) {
    if (IsDlrmModelText(f.model)) {
      return absl::InvalidArgumentError(
          "--pipeline-stages splits sequential models; a DLRM is not one");
    }
    return RunPipelineCost(f);
  }
  if (IsDlrmModelText(f.model)) return RunSparseCost(f);
  RETURN_IF_ERROR(CheckDenseFlags(f));
  ASSIGN_OR_RETURN(CostInput in, ToInput(f));
  in.mode = CostMode::kPs;
  ASSIGN_OR_RETURN(const CostPrediction ps, PredictStep(in));
  in.mode = CostMode::kRing;
  ASSIGN_OR_RETURN(const CostPrediction ring, PredictStep(in));
  ASSIGN_OR_RETURN(const Crossover cross, FindCrossover(in));
  ASSIGN_OR_RETURN(const OptimizerKind optimizer,
                   ParseOptimizerKind(f.optimizer));
  const MemoryPrediction memory = PredictMemory(
      {.params = ps.params,
       .optimizer_state_buffers = OptimizerStateBuffers(optimizer),
       .workers = f.workers,
       .shards = f.shards,
       .grads_idle_between_steps = !IsPyTorchModelWeights(f.model)});
  const bool ps_wins = ps.step_seconds < ring.step_seconds;
  const double ratio =
      ps_wins ? ring.step_seconds / std::max(ps.step_seconds, 1e-12)
              : ps.step_seconds / std::max(ring.step_seconds, 1e-12);
  if (f.json) {
    nlohmann::json out = {
        {"model", f.model},
        {"workers", f.workers},
        {"shards", f.shards},
        {"partitions", f.partitions},
        {"bandwidth_bytes_per_second", in.bandwidth_bytes_per_second},
        {"latency_seconds", in.latency_seconds},
        {"ring_same_host_link_bytes_per_second",
         in.same_host_link_bytes_per_second},
        {"compute_seconds", in.compute_seconds},
        {"compression", CompressionName(in.compression)},
        {"colocated", f.colocated},
        {"ps", ToJson(ps)},
        {"ring", ToJson(ring)},
        {"optimizer", f.optimizer},
        {"memory_bytes_per_process",
         {{"ps_worker", memory.ps_worker},
          {"ps_shard", memory.ps_shard},
          {"ring_member", memory.ring_member},
          {"ring_member_sharded_optimizer_state", memory.sharded_ring_member}}},
        {"winner", ps_wins ? "ps" : "ring"},
        {"speedup", ratio},
        {"crossover",
         {{"min_shards_ps_beats_ring", cross.min_shards_ps_beats_ring},
          {"params_ps_beats_ring_below", cross.params_ps_beats_ring_below},
          {"params_ps_beats_ring_from", cross.params_ps_beats_ring_from},
          {"min_workers_ps_beats_ring", cross.min_workers_ps_beats_ring},
          {"max_workers_ps_beats_ring", cross.max_workers_ps_beats_ring}}}};
    std::printf("%s\n", out.dump(2).c_str());
    return absl::OkStatus();
  }
  int64_t busiest_shard = 0;
  for (const RoleBytes& s : ps.shards)
    busiest_shard = std::max(busiest_shard, s.received);
  std::printf(
      "model %s: %lld parameters, %d workers, %d shards%s%s, link %s (%s), "
      "latency %s, "
      "compute %s, overhead %s, compression %s\n\n",
      f.model.c_str(), static_cast<long long>(ps.params), f.workers, f.shards,
      f.partitions > 1
          ? absl::StrFormat(" x %d partitions", f.partitions).c_str()
          : "",
      f.colocated ? " (colocated)" : "", f.bandwidth.c_str(),
      in.bandwidth_bytes_per_second > 0
          ? (FormatBytes(in.bandwidth_bytes_per_second) + "/s").c_str()
          : "unlimited",
      f.latency.c_str(),
      f.compute_from.empty()
          ? f.compute.c_str()
          : absl::StrFormat("%.4gs (measured, %s)", in.compute_seconds,
                            f.compute_from)
                .c_str(),
      f.overhead.c_str(), CompressionName(in.compression).c_str());
  if (in.same_host_link_bytes_per_second > 0) {
    std::printf("ring members on one host: shared-memory links of %s/s\n\n",
                FormatBytes(in.same_host_link_bytes_per_second).c_str());
  }
  std::printf("%-6s %14s %14s %16s %12s %12s %12s  %s\n", "mode", "sent/worker",
              "recv/worker", "recv/shard(max)", "comm", "exposed", "step",
              "bound by");
  for (const CostPrediction* p : {&ps, &ring}) {
    std::printf(
        "%-6s %14s %14s %16s %12s %12s %12s  %s\n",
        p->mode == CostMode::kPs ? "ps" : "ring",
        FormatBytes(p->worker.sent).c_str(),
        FormatBytes(p->worker.received).c_str(),
        p->mode == CostMode::kPs ? FormatBytes(busiest_shard).c_str() : "-",
        FormatMillis(p->comm_seconds).c_str(),
        FormatMillis(p->exposed_comm_seconds).c_str(),
        FormatMillis(p->step_seconds).c_str(), p->bottleneck.c_str());
  }
  std::printf("\n%s wins: %.2fx faster per step\n", ps_wins ? "PS" : "ring",
              ratio);
  const double model_bytes = 4.0 * static_cast<double>(ps.params);
  const auto times_model = [&](int64_t bytes) {
    return absl::StrFormat("%s (%.2fx the model)", FormatBytes(bytes),
                           static_cast<double>(bytes) / model_bytes);
  };
  std::printf(
      "memory per process (training state, %s; the process adds ~35-50 "
      "MiB, its receive buffers and its dataset):\n"
      "  PS worker %s, PS shard %s\n"
      "  ring member %s, with --ring-shard-optimizer-state %s\n",
      f.optimizer.c_str(), times_model(memory.ps_worker).c_str(),
      times_model(memory.ps_shard).c_str(),
      times_model(memory.ring_member).c_str(),
      times_model(memory.sharded_ring_member).c_str());
  std::printf("crossovers (one quantity varied, everything else as above):\n");
  const std::string shards_line =
      cross.min_shards_ps_beats_ring < 0
          ? std::string("PS never beats ring")
          : absl::StrCat("PS beats ring from ", cross.min_shards_ps_beats_ring,
                         " shards");
  if (f.partitions > 1) {
    std::printf("  shards 1..64 (%d workers, %d partitions each): %s\n",
                f.workers, f.partitions, shards_line.c_str());
  } else {
    std::printf("  shards 1..64 (%d workers):              %s\n", f.workers,
                shards_line.c_str());
  }
  std::string size_line;
  if (cross.params_ps_beats_ring_below >= 0) {
    size_line = absl::StrCat("PS beats ring below ",
                             cross.params_ps_beats_ring_below, " parameters");
  } else if (cross.params_ps_beats_ring_from >= 0) {
    size_line = absl::StrCat("PS beats ring from ",
                             cross.params_ps_beats_ring_from, " parameters");
  } else if (cross.sizes_ps_wins == 0) {
    size_line = "PS beats ring at no size";
  } else {
    size_line = "PS beats ring at every size";
  }
  std::printf("  model size (every tensor x 2^-20..2^10): %s\n",
              size_line.c_str());
  std::string workers_line = "PS never beats ring";
  if (cross.min_workers_ps_beats_ring >= 0) {
    workers_line =
        cross.max_workers_ps_beats_ring >= 256
            ? absl::StrCat("PS beats ring from ",
                           cross.min_workers_ps_beats_ring, " workers on")
        : cross.min_workers_ps_beats_ring == cross.max_workers_ps_beats_ring
            ? absl::StrCat("PS beats ring at ", cross.min_workers_ps_beats_ring,
                           " workers only")
            : absl::StrCat("PS beats ring from ",
                           cross.min_workers_ps_beats_ring, " to ",
                           cross.max_workers_ps_beats_ring, " workers");
  }
  std::printf("  workers 2..256 (%d shard%s):              %s\n",
              std::max(1, f.shards), f.shards == 1 ? "" : "s",
              workers_line.c_str());
  if (in.bandwidth_bytes_per_second == 0 && in.latency_seconds == 0) {
    std::printf(
        "\nnote: no --bandwidth and no --latency: only the bytes are "
        "predicted\n");
  }
  return absl::OkStatus();
}

}  // namespace

std::string FormatBytes(double b) {
  if (b >= 1e9) return absl::StrFormat("%.2f GB", b / 1e9);
  if (b >= 1e6) return absl::StrFormat("%.2f MB", b / 1e6);
  if (b >= 1e3) return absl::StrFormat("%.1f kB", b / 1e3);
  return absl::StrFormat("%.0f B", b);
}

std::string FormatMillis(double s) {
  return absl::StrFormat("%.3f ms", s * 1e3);
}

absl::Status ParseCostTimes(const CostFlags& f, CostInput& in) {
  ASSIGN_OR_RETURN(in.bandwidth_bytes_per_second, ParseBandwidth(f.bandwidth));
  absl::StatusOr<double> same_host = ParseBandwidth(f.same_host_link);
  if (!same_host.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--same-host-link: ", same_host.status().message()));
  }
  in.same_host_link_bytes_per_second = *same_host;
  ASSIGN_OR_RETURN(const absl::Duration latency, ParseLatency(f.latency));
  in.latency_seconds = absl::ToDoubleSeconds(latency);
  ASSIGN_OR_RETURN(const absl::Duration compute, ParseLatency(f.compute));
  in.compute_seconds = absl::ToDoubleSeconds(compute);
  if (!f.compute_from.empty()) {
    if (compute != absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          "give --compute or --compute-from, not both");
    }
    ASSIGN_OR_RETURN(in.compute_seconds, MeasuredCompute(f.compute_from));
  }
  ASSIGN_OR_RETURN(const absl::Duration overhead, ParseLatency(f.overhead));
  in.overhead_seconds = absl::ToDoubleSeconds(overhead);
  return absl::OkStatus();
}

void AddCostFlags(CLI::App& cmd, CostFlags& f) {
  std::string presets;
  for (const ModelPreset& p : ModelPresets()) {
    presets += "\n  " + p.name + ": " + p.mlp_spec + " (" + p.description + ")";
  }
  cmd.add_option(
         "--model", f.model,
         "a preset, a ferry.model.v1 JSON file (docs/models.md), a "
         "PyTorch model's weights (PATH.safetensors, or a --model external "
         "job's --export directory: its tensors) or MLP sizes like "
         "784-256-128-10; presets:" +
             presets +
             "\n  mlp: 784-256-128-10 (the default MLP)\n  convnet: the "
             "PyTorch MNIST example ConvNet, 1.2M parameters\n  dlrm: "
             "DLRM, Criteo Kaggle configuration (or a JSON of kind dlrm): "
             "PS, ring all-gather of the touched rows and ring all-reduce "
             "of the full tables")
      ->capture_default_str();
  cmd.add_option("--workers", f.workers, "workers (W)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--shards", f.shards, "PS shards (S)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--partitions", f.partitions,
                 "PS: logical shards per shard process (ferry local "
                 "--partitions), each applied and pulled as soon as its "
                 "pushes are in, overlapping the pushes still streaming")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd.add_option("--bandwidth", f.bandwidth,
                 "per-process link, each way: 1Gbit, 10Gbit, 25Gbit, 800Mbit, "
                 "2GB/s, 0 = unlimited")
      ->capture_default_str();
  cmd.add_option("--latency", f.latency, "per message: 50us, 1ms, 0")
      ->capture_default_str();
  cmd.add_option("--compute", f.compute,
                 "forward + backward time of one worker's step: 20ms, 0.3s, 0")
      ->capture_default_str();
  cmd.add_option("--compute-from", f.compute_from,
                 "instead of --compute: a ferry local --summary-json whose "
                 "measured compute per worker step "
                 "(window_compute_seconds_per_worker_step) is the step's "
                 "compute, e.g. a PyTorch model's job (docs/pytorch.md)");
  cmd.add_option("--overhead", f.overhead,
                 "the stack's own per-step exchange cost with no link limit "
                 "(control round trip, "
                 "serialization; ferry bench compare measures it on loopback): "
                 "PS adds it, ring "
                 "overlaps it")
      ->capture_default_str();
  cmd.add_option("--compression", f.compression,
                 "gradients on the wire: none, fp16, bf16, topk:R")
      ->capture_default_str();
  cmd.add_option("--same-host-link", f.same_host_link,
                 "ring: every member on one host, neighbours linked by "
                 "shared-memory links of this bandwidth each way (ferry's "
                 "default there; bench/compare_allreduce.sh's 2-rank links "
                 "busbw measures it, e.g. 6GB/s), no per-message latency; PS "
                 "keeps --bandwidth and --latency (gRPC over loopback). 0: "
                 "network links")
      ->capture_default_str();
  cmd.add_flag("--colocated", f.colocated,
               "PS: one worker and one shard per host sharing its link (needs "
               "shards == workers)");
  cmd.add_option("--optimizer", f.optimizer,
                 "whose state the memory per process counts: sgd, momentum, "
                 "adam, adamw, ...")
      ->capture_default_str();
  cmd.add_option("--bucket-elements", f.bucket_elements,
                 "ring: gradient bucket size (floats)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--max-chunk-elements", f.max_chunk_elements,
                 "PS: largest chunk (floats)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--pack-chunks", f.pack_chunks,
                 "PS: consecutive tensors share chunks, as the coordinator's "
                 "--pack-chunks (false: one tensor per chunk at most)")
      ->capture_default_str();
  cmd.add_flag("--json", f.json, "print JSON instead of a table");
  // DLRM models (--model dlrm): the three sparse modes.
  cmd.add_option("--vocab-sizes", f.vocab_sizes,
                 "DLRM: rows of each embedding table, comma-separated, one per "
                 "field (default: ferry data ctr's, Criteo Kaggle's 26 "
                 "cardinalities)");
  cmd.add_option("--zipf", f.zipf,
                 "DLRM: Zipf exponent of every field's ids (as ferry data ctr "
                 "--zipf)")
      ->capture_default_str();
  cmd.add_option("--batch", f.batch,
                 "DLRM and pipelines: global batch, split over workers "
                 "(pipelines: over replicas)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--data-seed", f.data_seed,
                 "DLRM: ferry data ctr --seed, which sets each field's rate "
                 "of empty values (each empty value is one more id)")
      ->capture_default_str();
  cmd.add_flag("--no-empty", f.no_empty,
               "DLRM: fields without empty values (pure Zipf)");
  cmd.add_option("--unique-ids", f.unique_ids,
                 "DLRM: measured unique ids per step, summed over tables and "
                 "workers (ferry local's summary unique_ids_per_step), "
                 "instead of the expectation from the distribution");
  cmd.add_option("--sweep", f.sweep,
                 "DLRM: vary one quantity, everything else held, and print "
                 "where PS, all-gather and all-reduce cross over: batch "
                 "(global batch 16..2^20), table (every vocabulary x "
                 "2^-24..4), zipf (exponent 0.2..2.0)")
      ->check(CLI::IsMember({"batch", "table", "zipf"}));
  AddPipelineFlags(cmd, f.pipeline,
                   "W / P replicas, each stage all-reduced across them; "
                   "prints the pipeline's timeline, bubble and bytes (needs "
                   "--workers a multiple of it)");
  cmd.add_option("--sweep-values", f.sweep_values,
                 "DLRM: the swept values, comma-separated, increasing (batch "
                 "sizes, table factors or exponents)");
}

int RunCost(const CostFlags& flags) {
  if (absl::Status s = Run(flags); !s.ok()) {
    std::fprintf(stderr, "ferry cost: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  return 0;
}

}  // namespace ferry

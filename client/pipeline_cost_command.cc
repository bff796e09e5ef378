#include "client/pipeline_cost_command.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_format.h"
#include "client/pipeline_cost_model.h"
#include "common/status_macros.h"
#include "model/model_presets.h"
#include "nlohmann/json.hpp"

namespace ferry {

absl::Status RunPipelineCost(const CostFlags& f) {
  PipelineCostInput in;
  ASSIGN_OR_RETURN(const std::string spec, ResolveModel(f.model));
  ASSIGN_OR_RETURN(in.def, ResolveModelSpec(spec));
  ASSIGN_OR_RETURN(in.link.tensor_sizes, ModelTensorSizes(spec));
  RETURN_IF_ERROR(ParseCostTimes(f, in.link));
  in.link.workers = f.workers;
  in.link.shards = f.shards;
  in.link.bucket_elements = f.bucket_elements;
  in.link.max_chunk_elements = f.max_chunk_elements;
  in.batch = f.batch;
  ASSIGN_OR_RETURN(in.pipeline, ParsePipelineFlags(f.pipeline));
  ASSIGN_OR_RETURN(const PipelineCostPrediction p, PredictPipelineStep(in));
  // The same workers without a pipeline: every worker the whole model.
  CostInput dp = in.link;
  dp.mode = CostMode::kRing;
  ASSIGN_OR_RETURN(const CostPrediction ring, PredictStep(dp));
  dp.mode = CostMode::kPs;
  ASSIGN_OR_RETURN(const CostPrediction ps, PredictStep(dp));

  std::vector<StageRange> ranges;
  for (const StageCost& s : p.stages) ranges.push_back(s.layers);
  if (f.json) {
    nlohmann::json stages = nlohmann::json::array();
    for (size_t s = 0; s < p.stages.size(); ++s) {
      const StageCost& c = p.stages[s];
      stages.push_back(
          {{"layers", StageRangesString({&c.layers, 1})},
           {"params", c.params},
           {"compute_share", c.compute_share},
           {"forward_seconds_per_micro_batch", c.forward_seconds},
           {"backward_seconds_per_micro_batch", c.backward_seconds},
           {"busy_seconds", p.timeline.busy_seconds[s]},
           {"idle_seconds", p.timeline.idle_seconds[s]},
           {"neighbour_bytes_sent", c.neighbour_bytes_sent},
           {"neighbour_bytes_received", c.neighbour_bytes_received},
           {"allreduce_bytes_sent", c.allreduce_bytes_sent},
           {"allreduce_seconds", c.allreduce_seconds}});
    }
    nlohmann::json out = {
        {"model", f.model},
        {"workers", f.workers},
        {"stages", f.pipeline.stages},
        {"replicas", p.replicas},
        {"micro_batches", f.pipeline.micro_batches},
        {"schedule", PipelineScheduleName(in.pipeline.schedule)},
        {"split", StageRangesString(ranges)},
        {"batch", f.batch},
        {"micro_batch_rows", p.micro_batch_rows},
        {"bubble", p.timeline.bubble},
        {"textbook_bubble", p.textbook_bubble},
        {"pipeline_seconds", p.timeline.step_seconds},
        {"allreduce_seconds", p.allreduce_seconds},
        {"step_seconds", p.step_seconds},
        {"per_stage", stages},
        {"data_parallel",
         {{"ring_step_seconds", ring.step_seconds},
          {"ps_step_seconds", ps.step_seconds}}}};
    std::printf("%s\n", out.dump(2).c_str());
    return absl::OkStatus();
  }
  std::printf(
      "model %s: %lld parameters; %d workers = %d replica%s x %d stages (split "
      "%s by %s), %d micro-batches (%s), batch %lld = %lld per replica, %lld "
      "rows per micro-batch; link %s, latency %s, compute %s\n\n",
      f.model.c_str(), static_cast<long long>(ring.params), f.workers,
      p.replicas, p.replicas == 1 ? "" : "s", f.pipeline.stages,
      StageRangesString(ranges).c_str(),
      in.pipeline.split.empty() ? StageBalanceName(in.pipeline.balance)
                                : "--pipeline-split",
      f.pipeline.micro_batches, PipelineScheduleName(in.pipeline.schedule),
      static_cast<long long>(f.batch), static_cast<long long>(p.replica_batch),
      static_cast<long long>(p.micro_batch_rows), f.bandwidth.c_str(),
      f.latency.c_str(), f.compute.c_str());
  std::printf("%-5s %-7s %12s %8s %11s %11s %12s %12s %12s\n", "stage",
              "layers", "params", "compute", "busy", "idle", "to/from nbrs",
              "all-reduce", "ar time");
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const StageCost& c = p.stages[s];
    std::printf("%-5zu %-7s %12lld %7.1f%% %11s %11s %12s %12s %12s\n", s,
                StageRangesString({&c.layers, 1}).c_str(),
                static_cast<long long>(c.params), 100.0 * c.compute_share,
                FormatMillis(p.timeline.busy_seconds[s]).c_str(),
                FormatMillis(p.timeline.idle_seconds[s]).c_str(),
                FormatBytes(c.neighbour_bytes_sent).c_str(),
                FormatBytes(c.allreduce_bytes_sent).c_str(),
                FormatMillis(c.allreduce_seconds).c_str());
  }
  std::printf(
      "\nbubble %.3f (the timeline; equal stages would give %.3f)\n"
      "step: pipeline %s + all-reduce %s = %s\n"
      "the same %d workers, data parallel (the whole model each): ring %s, "
      "PS (%d shards) %s\n",
      p.timeline.bubble, p.textbook_bubble,
      FormatMillis(p.timeline.step_seconds).c_str(),
      FormatMillis(p.allreduce_seconds).c_str(),
      FormatMillis(p.step_seconds).c_str(), f.workers,
      FormatMillis(ring.step_seconds).c_str(), f.shards,
      FormatMillis(ps.step_seconds).c_str());
  if (in.link.compute_seconds == 0) {
    std::printf(
        "\nnote: no --compute: the timeline holds only the transfers; pass "
        "one worker's forward + backward time of batch / workers samples\n");
  }
  return absl::OkStatus();
}

}  // namespace ferry

#include "client/pipeline_cost_model.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/model_params.h"
#include "model/shape_inference.h"

namespace ferry {

absl::StatusOr<PipelineCostPrediction> PredictPipelineStep(
    const PipelineCostInput& in) {
  const int p = in.pipeline.stages;
  const int w = in.link.workers;
  if (p < 1 || w < p || w % p != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--workers (", w, ") must be a multiple of --pipeline-stages (", p,
        "): each replica is one worker per stage"));
  }
  PipelineCostPrediction out;
  out.replicas = w / p;
  out.replica_batch = in.batch / out.replicas;
  if (out.replica_batch < in.pipeline.micro_batches ||
      in.pipeline.micro_batches < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "each replica's batch (", out.replica_batch, " = --batch ", in.batch,
        " / ", out.replicas, " replicas) must hold at least --micro-batches (",
        in.pipeline.micro_batches, ") rows"));
  }
  out.micro_batch_rows = (out.replica_batch + in.pipeline.micro_batches - 1) /
                         in.pipeline.micro_batches;
  ASSIGN_OR_RETURN(
      std::vector<StageRange> split,
      SplitModel(in.def, p, in.pipeline.split, in.pipeline.balance));
  ASSIGN_OR_RETURN(std::vector<double> flops,
                   LayerCosts(in.def, StageBalance::kCompute));
  ASSIGN_OR_RETURN(std::vector<SampleShape> shapes, InferShapes(in.def));
  ASSIGN_OR_RETURN(ParameterLayout layout, ModelParameterLayout(in.def));
  const double total_flops = std::accumulate(flops.begin(), flops.end(), 0.0);
  // Elements per sample entering each stage.
  const auto input_elements = [&](const StageRange& r) {
    return r.first_layer == 0 ? ShapeElements(in.def.input.shape)
                              : ShapeElements(shapes[r.first_layer - 1]);
  };
  const double bandwidth = in.link.bandwidth_bytes_per_second;
  const double replica_compute = in.link.compute_seconds * p;
  const double backward_share = in.link.backward_fraction;
  size_t tensor = 0;
  std::vector<double> forward, backward;
  for (int s = 0; s < p; ++s) {
    const StageRange& r = split[s];
    StageCost c;
    c.layers = r;
    double stage_flops = 0.0;
    std::vector<int64_t> tensors;
    for (int i = r.first_layer; i < r.end_layer; ++i) {
      stage_flops += flops[i];
      for (size_t t = 0; t < LayerParamDefs(in.def.layers[i]).size(); ++t) {
        tensors.push_back(layout.tensors()[tensor++].numel);
      }
    }
    c.params = std::accumulate(tensors.begin(), tensors.end(), int64_t{0});
    c.compute_share = total_flops > 0 ? stage_flops / total_flops : 0.0;
    const double per_micro =
        replica_compute * c.compute_share / in.pipeline.micro_batches;
    c.forward_seconds = per_micro * (1.0 - backward_share);
    c.backward_seconds = per_micro * backward_share;
    const int64_t out_elements =
        s + 1 < p ? ShapeElements(shapes[r.end_layer - 1]) : 0;
    const int64_t in_elements = s > 0 ? input_elements(r) : 0;
    c.neighbour_bytes_sent =
        4 * out.replica_batch * (out_elements + in_elements);
    c.neighbour_bytes_received = c.neighbour_bytes_sent;
    if (out_elements > 0 && bandwidth > 0) {
      out.transfer_seconds =
          std::max(out.transfer_seconds,
                   4.0 * out.micro_batch_rows * out_elements / bandwidth);
    }
    if (out.replicas > 1 && !tensors.empty()) {
      CostInput ring = in.link;
      ring.mode = CostMode::kRing;
      ring.workers = out.replicas;
      ring.tensor_sizes = tensors;
      ring.compute_seconds = 0;
      ring.overhead_seconds = 0;
      ASSIGN_OR_RETURN(CostPrediction allreduce, PredictStep(ring));
      c.allreduce_seconds = allreduce.comm_seconds;
      c.allreduce_bytes_sent = allreduce.worker.sent;
    }
    out.allreduce_seconds =
        std::max(out.allreduce_seconds, c.allreduce_seconds);
    forward.push_back(c.forward_seconds);
    backward.push_back(c.backward_seconds);
    out.stages.push_back(c);
  }
  if (p > 1) out.transfer_seconds += in.link.latency_seconds;
  ASSIGN_OR_RETURN(
      out.timeline,
      SimulatePipeline(in.pipeline.schedule, in.pipeline.micro_batches, forward,
                       backward, out.transfer_seconds));
  out.textbook_bubble = PredictedBubble(p, in.pipeline.micro_batches);
  out.step_seconds = out.timeline.step_seconds + out.allreduce_seconds;
  return out;
}

}  // namespace ferry

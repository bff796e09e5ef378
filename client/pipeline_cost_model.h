// The cost model of a pipeline-parallel job: W workers as R = W / P replicas
// of a P-stage pipeline (docs/pipeline.md), each stage all-reducing its own
// parameters with the same stage of the other replicas. Pure: a prediction
// from the model's layers, the link and the measured compute time.
//
// A step: the replica's batch (batch / R) cut into M micro-batches runs the
// schedule's timeline (pipeline/pipeline_schedule.h SimulatePipeline): stage
// s's forward of a micro-batch takes compute x P x share_s / M x 1/3, its
// backward twice that (share_s: the stage's part of the model's estimated
// training FLOPs; compute: one worker's forward + backward of batch / W
// samples through the whole model, as `ferry cost --compute`), and every
// transfer between neighbours rows x boundary elements x 4 bytes over the
// link plus its latency. Then every stage all-reduces its gradient over the
// R replicas (the dense ring model, not overlapped with the pipeline).
#ifndef FERRY_CLIENT_PIPELINE_COST_MODEL_H_
#define FERRY_CLIENT_PIPELINE_COST_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cost_model.h"
#include "model/model_def.h"
#include "model/pipeline_split.h"
#include "pipeline/pipeline_options.h"
#include "pipeline/pipeline_schedule.h"

namespace ferry {

struct PipelineCostInput {
  ModelDef def;
  PipelineOptions pipeline;  // stages, micro-batches, schedule, split
  int64_t batch = 128;       // global, over every replica
  // workers, link, latency, compute (as above), buckets and pieces.
  CostInput link;
};

struct StageCost {
  StageRange layers;
  int64_t params = 0;
  double compute_share = 0.0;     // of the model's estimated training FLOPs
  double forward_seconds = 0.0;   // one micro-batch
  double backward_seconds = 0.0;  // one micro-batch
  // One stage worker's payload per step: activations and gradients with
  // its neighbours, and its stage's all-reduce.
  int64_t neighbour_bytes_sent = 0;
  int64_t neighbour_bytes_received = 0;
  int64_t allreduce_bytes_sent = 0;
  double allreduce_seconds = 0.0;
};

struct PipelineCostPrediction {
  int replicas = 1;
  int64_t replica_batch = 0;
  int64_t micro_batch_rows = 0;  // the largest micro-batch
  std::vector<StageCost> stages;
  double transfer_seconds = 0.0;   // one micro-batch over the widest boundary
  PipelineTimeline timeline;       // the pipelined forward and backward
  double textbook_bubble = 0.0;    // (P-1)/(M+P-1), equal stages
  double allreduce_seconds = 0.0;  // the slowest stage's
  double step_seconds = 0.0;       // timeline + all-reduce
};

// Errors: INVALID_ARGUMENT for workers not a multiple of stages, a replica
// batch below micro_batches, a split the model cannot take, or what
// PredictStep refuses.
absl::StatusOr<PipelineCostPrediction> PredictPipelineStep(
    const PipelineCostInput& input);

}  // namespace ferry

#endif  // FERRY_CLIENT_PIPELINE_COST_MODEL_H_

// Conversions between the job's protos and the core's plain structs.
#ifndef FERRY_PROTO_JOB_CONVERT_H_
#define FERRY_PROTO_JOB_CONVERT_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/file_system.h"
#include "common/gradient_codec.h"
#include "common/optimizer_config.h"
#include "common/sharding.h"
#include "ferry/v1/common.pb.h"
#include "model/dlrm_spec.h"
#include "model/embedding_options.h"
#include "model/model_def.h"
#include "model/parameter_layout.h"

namespace ferry {

v1::OptimizerSpec ToProto(const OptimizerConfig& config);
// The spec's settings; parameter groups keep their tensor names only (no
// element ranges: see JobOptimizer).
OptimizerConfig FromProto(const v1::OptimizerSpec& spec);
// The job's optimizer with its parameter groups' element ranges resolved
// from their tensor names in the job's flat order. INVALID_ARGUMENT naming
// a group's tensor that is not one of the job's parameters. Not validated
// (a cosine schedule's length may be resolved after): Optimizer::Create
// runs ValidateOptimizerConfig.
absl::StatusOr<OptimizerConfig> JobOptimizer(const v1::JobSpec& job);

// JobSpec.compression; the enums share their numbers. An unset message is
// fp32 (no compression).
v1::GradientCompression ToProto(const GradientCompression& compression);
GradientCompression FromProto(const v1::GradientCompression& compression);

// "sync", "async", "ssp:K" (K >= 0). INVALID_ARGUMENT otherwise.
absl::Status ParseConsistency(const std::string& text,
                              v1::Consistency* consistency, int* staleness);
std::string ConsistencyName(v1::Consistency consistency, int staleness);
// "ps", "ring" or "hybrid".
absl::StatusOr<v1::Mode> ParseMode(const std::string& text);
std::string ModeName(v1::Mode mode);
// Whether a job of `mode` runs PS shards (ps: every parameter; hybrid: the
// embedding tables) and whether its workers form a ring (ring: every
// parameter; hybrid: the dense layers).
bool ModeHasShards(v1::Mode mode);
bool ModeHasRing(v1::Mode mode);

// JobSpec.embedding. FromProto checks it (ValidateEmbeddingOptions:
// INVALID_ARGUMENT naming the flag; an unknown optimizer name too).
v1::EmbeddingSpec ToProto(const EmbeddingOptions& options);
absl::StatusOr<EmbeddingOptions> FromProto(const v1::EmbeddingSpec& spec);

// Whether the job trains a DLRM CTR model (model_def's "kind" is "dlrm"):
// dense layers as usual plus hash-keyed embedding tables (docs/sparse.md).
bool IsDlrmJob(const v1::JobSpec& job);
// The DLRM of such a job. INVALID_ARGUMENT when model_def is not one.
absl::StatusOr<DlrmSpec> JobDlrmSpec(const v1::JobSpec& job);
// The layout of JobSpec.tensors (ParameterLayout::Create's errors).
absl::StatusOr<ParameterLayout> JobTensorLayout(const v1::JobSpec& job);
// The job's flat buffer (what shards hold and workers push): for a job
// whose model is a worker's its tensor list (FAILED_PRECONDITION before it
// is defined), for a DLRM its dense parameters (DlrmParameterLayout), else
// ModelJobLayout(JobModel).
absl::StatusOr<ParameterLayout> JobDenseLayout(const v1::JobSpec& job);
// The cuts every process of the job places its PS chunks with
// (common/sharding.h): tensors packed when JobSpec.pack_chunks and not a
// pipeline job, and a cut where the BatchNorm state begins (it travels
// uncompressed) in a buffer of `total_elements`. JobStateElements' errors.
absl::StatusOr<ChunkCuts> JobChunkCuts(const v1::JobSpec& job,
                                       int64_t total_elements);

// The job's PS chunks over `layout` (what a worker or the coordinator
// exchanges with the shards): PlaceChunks with the job's shard count,
// max_chunk_elements (kDefaultMaxChunkElements when 0) and JobChunkCuts.
// JobChunkCuts' and PlaceChunks' errors.
absl::StatusOr<std::vector<Chunk>> JobChunks(const v1::JobSpec& job,
                                             const ParameterLayout& layout);

// The job's starting flat buffer (FAILED_PRECONDITION for a job whose model
// is a worker's: the coordinator serves its values): for a DLRM the dense
// weights of its init_from export (model/dlrm_weights.h ReadDlrmWeights; its
// errors prefixed with the flag) or DlrmInitialParameters, else
// JobInitialValues.
absl::StatusOr<std::vector<float>> JobDenseInitialValues(
    const v1::JobSpec& job);
// Elements [begin, end) of JobDenseInitialValues(job); a layer-stack model
// without init_from is drawn without holding the whole buffer (a shard's
// slice of a large model). INVALID_ARGUMENT for a range outside it.
absl::StatusOr<std::vector<float>> JobDenseInitialSlice(const v1::JobSpec& job,
                                                        int64_t begin,
                                                        int64_t end);

// The model a job trains: JobSpec.model_def when set, else JobSpec.model as
// --model text (a preset or an MLP string). INVALID_ARGUMENT when it does not
// parse or validate.
absl::StatusOr<ModelDef> JobModel(const v1::JobSpec& job);

// Whether a distributed job can train `model` so: a model with BatchNorm
// state needs sync steps (`sync`: ring, or PS sync; an async or SSP push
// would move the state by a change computed against stale state, which
// overshoots as staleness grows) and at least 2 samples per worker in a
// step (global_batch >= 2 * workers: BatchNorm trains on at least two
// values per channel). INVALID_ARGUMENT naming the first BatchNorm layer.
absl::Status CheckModelForDistributedJob(const ModelDef& model, bool sync,
                                         int64_t global_batch, int workers);

// Elements of BatchNorm state at the end of the job's flat buffer
// (ModelStateLayout of JobModel); 0 for a job spec without a model (tools,
// tests). The JobModel's errors otherwise.
absl::StatusOr<int64_t> JobStateElements(const v1::JobSpec& job);

// The job's starting flat buffer (model/model_params.h ModelJobLayout:
// parameters, then BatchNorm state): JobSpec.init_from's values (checked to
// be the job's model; INVALID_ARGUMENT naming the first difference, the
// reader's errors for missing or malformed files), else the seed's. An
// init_from directory without model.safetensors but with ring checkpoint
// parts (a ring job's --ring-checkpoint-dir) gives its newest complete
// checkpoint's values (common/ring_checkpoint.h LoadNewestRingCheckpoint:
// NOT_FOUND when none is complete, FAILED_PRECONDITION for another size).
absl::StatusOr<std::vector<float>> JobInitialValues(const v1::JobSpec& job,
                                                    const ModelDef& model);

// Whether --init-from's `dir` is a ring job's checkpoint directory (ring
// checkpoint parts, common/ring_checkpoint.h, and no model.safetensors)
// rather than an export.
bool IsRingCheckpointDirectory(FileSystem* fs, const std::string& dir);
// The parameters of the newest complete ring checkpoint in `dir` whose
// state has `n` elements (LoadNewestRingCheckpoint; its errors prefixed
// with "--init-from DIR").
absl::StatusOr<std::vector<float>> RingCheckpointInitialValues(
    FileSystem* fs, const std::string& dir, int64_t n);

// FAILED_PRECONDITION unless the job's tensor list (when it has one) names
// exactly the tensors of `layout`, in order, with the same shapes.
absl::Status CheckJobTensors(const v1::JobSpec& job,
                             const ParameterLayout& layout);

}  // namespace ferry

#endif  // FERRY_PROTO_JOB_CONVERT_H_

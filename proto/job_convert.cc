#include "proto/job_convert.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/file_system.h"
#include "common/ring_checkpoint.h"
#include "common/status_macros.h"
#include "model/dlrm_weights.h"
#include "model/model_export.h"
#include "model/model_params.h"
#include "model/model_presets.h"

namespace ferry {

v1::OptimizerSpec ToProto(const OptimizerConfig& c) {
  v1::OptimizerSpec s;
  s.set_kind(static_cast<v1::OptimizerKind>(c.kind));
  s.set_lr(c.lr);
  s.set_momentum(c.momentum);
  s.set_nesterov(c.nesterov);
  s.set_weight_decay(c.weight_decay);
  s.set_beta1(c.beta1);
  s.set_beta2(c.beta2);
  s.set_epsilon(c.epsilon);
  s.set_schedule(static_cast<v1::ScheduleKind>(c.schedule.kind));
  s.set_warmup_steps(c.schedule.warmup_steps);
  s.set_total_steps(c.schedule.total_steps);
  s.set_min_lr_ratio(c.schedule.min_lr_ratio);
  s.set_step_size(c.schedule.step_size);
  s.set_gamma(c.schedule.gamma);
  s.mutable_lr_by_step()->Assign(c.lr_by_step.begin(), c.lr_by_step.end());
  for (const ParamGroup& g : c.groups) {
    v1::ParamGroup* group = s.add_groups();
    for (const std::string& name : g.tensors) group->add_tensors(name);
    group->set_lr(g.lr);
    group->set_weight_decay(g.weight_decay);
    group->mutable_lr_by_step()->Assign(g.lr_by_step.begin(),
                                        g.lr_by_step.end());
  }
  return s;
}

OptimizerConfig FromProto(const v1::OptimizerSpec& s) {
  OptimizerConfig c;
  c.kind = static_cast<OptimizerKind>(s.kind());
  c.lr = s.lr();
  c.momentum = s.momentum();
  c.nesterov = s.nesterov();
  c.weight_decay = s.weight_decay();
  c.beta1 = s.beta1();
  c.beta2 = s.beta2();
  c.epsilon = s.epsilon();
  c.schedule.kind = static_cast<ScheduleKind>(s.schedule());
  c.schedule.warmup_steps = s.warmup_steps();
  c.schedule.total_steps = s.total_steps();
  c.schedule.min_lr_ratio = s.min_lr_ratio();
  c.schedule.step_size = s.step_size();
  c.schedule.gamma = s.gamma();
  c.lr_by_step.assign(s.lr_by_step().begin(), s.lr_by_step().end());
  for (const v1::ParamGroup& g : s.groups()) {
    ParamGroup& group = c.groups.emplace_back();
    group.tensors.assign(g.tensors().begin(), g.tensors().end());
    group.lr = g.lr();
    group.weight_decay = g.weight_decay();
    group.lr_by_step.assign(g.lr_by_step().begin(), g.lr_by_step().end());
  }
  return c;
}

absl::StatusOr<OptimizerConfig> JobOptimizer(const v1::JobSpec& job) {
  OptimizerConfig config = FromProto(job.optimizer());
  if (config.groups.empty()) return config;
  ASSIGN_OR_RETURN(const ParameterLayout layout, JobTensorLayout(job));
  absl::flat_hash_map<std::string, int> index;  // tensor name -> position
  for (int i = 0; i < job.tensors_size(); ++i) index[job.tensors(i).name()] = i;
  for (size_t g = 0; g < config.groups.size(); ++g) {
    for (const std::string& name : config.groups[g].tensors) {
      auto it = index.find(name);
      if (it == index.end() || job.tensors(it->second).buffer()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "optimizer: parameter group ", g, " names '", name,
            it == index.end() ? "', which is not one of the job's tensors"
                              : "', a buffer (buffers have no optimizer)"));
      }
      const TensorSlot& slot = layout.tensors()[it->second];
      config.groups[g].ranges.emplace_back(slot.offset,
                                           slot.offset + slot.numel);
    }
  }
  return config;
}

v1::GradientCompression ToProto(const GradientCompression& c) {
  v1::GradientCompression out;
  out.set_encoding(static_cast<v1::GradientEncoding>(c.encoding));
  out.set_topk_ratio(c.encoding == GradientEncoding::kTopK ? c.topk_ratio : 0);
  out.set_error_feedback(c.error_feedback);
  return out;
}

GradientCompression FromProto(const v1::GradientCompression& c) {
  GradientCompression out;
  out.encoding = static_cast<GradientEncoding>(c.encoding());
  out.topk_ratio = c.topk_ratio();
  out.error_feedback = c.error_feedback();
  return out;
}

absl::Status ParseConsistency(const std::string& text,
                              v1::Consistency* consistency, int* staleness) {
  *staleness = 0;
  if (text == "sync") {
    *consistency = v1::CONSISTENCY_SYNC;
  } else if (text == "async") {
    *consistency = v1::CONSISTENCY_ASYNC;
  } else if (absl::StartsWith(text, "ssp:") &&
             absl::SimpleAtoi(text.substr(4), staleness) && *staleness >= 0) {
    *consistency = v1::CONSISTENCY_SSP;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown consistency '", text,
                     "': expected sync, async or ssp:K (K >= 0)"));
  }
  return absl::OkStatus();
}

std::string ConsistencyName(v1::Consistency consistency, int staleness) {
  switch (consistency) {
    case v1::CONSISTENCY_SYNC:
      return "sync";
    case v1::CONSISTENCY_ASYNC:
      return "async";
    case v1::CONSISTENCY_SSP:
      return absl::StrCat("ssp:", staleness);
    default:
      return "unknown";
  }
}

absl::StatusOr<v1::Mode> ParseMode(const std::string& text) {
  if (text == "ps") return v1::MODE_PS;
  if (text == "ring") return v1::MODE_RING;
  if (text == "hybrid") return v1::MODE_HYBRID;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown mode '", text, "': expected ps, ring or hybrid"));
}

std::string ModeName(v1::Mode mode) {
  switch (mode) {
    case v1::MODE_RING:
      return "ring";
    case v1::MODE_HYBRID:
      return "hybrid";
    default:
      return "ps";
  }
}

bool ModeHasShards(v1::Mode mode) { return mode != v1::MODE_RING; }

bool ModeHasRing(v1::Mode mode) { return mode != v1::MODE_PS; }

v1::EmbeddingSpec ToProto(const EmbeddingOptions& options) {
  v1::EmbeddingSpec spec;
  const RowOptimizerParams& o = options.optimizer;
  spec.set_optimizer(RowOptimizerKindName(o.kind));
  spec.set_lr(o.lr);
  spec.set_epsilon(o.epsilon);
  spec.set_initial_accumulator(o.initial_accumulator);
  spec.set_beta(o.beta);
  spec.set_l1(o.l1);
  spec.set_l2(o.l2);
  spec.set_admit_count(options.admit_count);
  spec.set_ttl_steps(options.ttl_steps);
  spec.set_max_mb(options.max_mb);
  return spec;
}

absl::StatusOr<EmbeddingOptions> FromProto(const v1::EmbeddingSpec& spec) {
  EmbeddingOptions options;
  RowOptimizerParams& o = options.optimizer;
  ASSIGN_OR_RETURN(o.kind, ParseRowOptimizerKind(spec.optimizer()));
  o.lr = static_cast<float>(spec.lr());
  o.epsilon = static_cast<float>(spec.epsilon());
  o.initial_accumulator = static_cast<float>(spec.initial_accumulator());
  o.beta = static_cast<float>(spec.beta());
  o.l1 = static_cast<float>(spec.l1());
  o.l2 = static_cast<float>(spec.l2());
  options.admit_count = spec.admit_count();
  options.ttl_steps = spec.ttl_steps();
  options.max_mb = spec.max_mb();
  RETURN_IF_ERROR(ValidateEmbeddingOptions(options));
  return options;
}

bool IsDlrmJob(const v1::JobSpec& job) { return IsDlrmJson(job.model_def()); }

absl::StatusOr<DlrmSpec> JobDlrmSpec(const v1::JobSpec& job) {
  if (!IsDlrmJob(job)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the job's model '", job.model(), "' is not a DLRM CTR model"));
  }
  absl::StatusOr<DlrmSpec> spec = ParseDlrmJson(job.model_def());
  if (!spec.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the job's model '", job.model(), "': ", spec.status().message()));
  }
  return spec;
}

namespace {

// What the seed-drawn starting values answer for a job whose model is a
// worker's: its values come from the coordinator.
absl::Status WorkerModelValuesError() {
  return absl::FailedPreconditionError(
      "the job's starting values are its first worker's: fetch them from the "
      "coordinator (Coordinator.ModelValues)");
}

}  // namespace

absl::StatusOr<ParameterLayout> JobTensorLayout(const v1::JobSpec& job) {
  std::vector<ParameterLayout::TensorDef> defs;
  for (const v1::TensorSpec& t : job.tensors()) {
    defs.push_back(
        {t.name(), std::vector<int64_t>(t.shape().begin(), t.shape().end())});
  }
  return ParameterLayout::Create(defs);
}

absl::StatusOr<ParameterLayout> JobDenseLayout(const v1::JobSpec& job) {
  if (job.model_from_worker()) {
    if (job.tensors().empty()) {
      return absl::FailedPreconditionError(
          "the job's model is not defined yet: its first worker defines it");
    }
    return JobTensorLayout(job);
  }
  if (IsDlrmJob(job)) {
    ASSIGN_OR_RETURN(const DlrmSpec spec, JobDlrmSpec(job));
    return DlrmParameterLayout(spec);
  }
  ASSIGN_OR_RETURN(const ModelDef model, JobModel(job));
  return ModelJobLayout(model);
}

absl::StatusOr<std::vector<float>> JobDenseInitialValues(
    const v1::JobSpec& job) {
  if (job.model_from_worker()) return WorkerModelValuesError();
  if (IsDlrmJob(job)) {
    ASSIGN_OR_RETURN(const DlrmSpec spec, JobDlrmSpec(job));
    if (!job.init_from().empty() &&
        IsRingCheckpointDirectory(PosixFileSystem(), job.init_from())) {
      // A ring DLRM's checkpoint: its dense parameters.
      ASSIGN_OR_RETURN(const ParameterLayout layout, DlrmParameterLayout(spec));
      return RingCheckpointInitialValues(PosixFileSystem(), job.init_from(),
                                         layout.total_elements());
    }
    if (!job.init_from().empty()) {  // a DLRM export's dense half
      absl::StatusOr<std::vector<float>> imported =
          ReadDlrmWeights(job.init_from(), spec);
      if (!imported.ok()) {
        return absl::Status(imported.status().code(),
                            absl::StrCat("--init-from ", job.init_from(), ": ",
                                         imported.status().message()));
      }
      return imported;
    }
    ASSIGN_OR_RETURN(const ParameterLayout layout, DlrmParameterLayout(spec));
    return DlrmInitialParameters(spec, layout, job.seed());
  }
  ASSIGN_OR_RETURN(const ModelDef model, JobModel(job));
  return JobInitialValues(job, model);
}

absl::StatusOr<std::vector<float>> JobDenseInitialSlice(const v1::JobSpec& job,
                                                        int64_t begin,
                                                        int64_t end) {
  if (job.model_from_worker()) return WorkerModelValuesError();
  if (!IsDlrmJob(job) && job.init_from().empty()) {
    ASSIGN_OR_RETURN(const ModelDef model, JobModel(job));
    return ModelJobInitialSlice(model, job.seed(), begin, end);
  }
  ASSIGN_OR_RETURN(std::vector<float> all, JobDenseInitialValues(job));
  if (begin < 0 || begin > end || end > static_cast<int64_t>(all.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("initial slice [", begin, ", ", end, ") is outside the ",
                     all.size(), " values"));
  }
  return std::vector<float>(all.begin() + begin, all.begin() + end);
}

absl::StatusOr<ModelDef> JobModel(const v1::JobSpec& job) {
  if (job.model_from_worker()) {
    return absl::InvalidArgumentError(
        "the job's model is its ferry.torch workers' (--model external): "
        "only a PyTorch script (docs/pytorch.md) can train it");
  }
  if (IsDlrmJob(job)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the job's model '", job.model(),
        "' is a DLRM CTR model, not a layer stack (this path trains dense "
        "models only)"));
  }
  if (job.model_def().empty()) return ResolveModelSpec(job.model());
  absl::StatusOr<ModelDef> def = ParseModelJson(job.model_def());
  if (!def.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the job's model '", job.model(), "': ", def.status().message()));
  }
  return def;
}

bool IsRingCheckpointDirectory(FileSystem* fs, const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> names = fs->ListDirectory(dir);
  return names.ok() &&
         std::find(names->begin(), names->end(), kModelWeightsFile) ==
             names->end() &&
         HasRingCheckpoint(fs, dir);
}

absl::StatusOr<std::vector<float>> RingCheckpointInitialValues(
    FileSystem* fs, const std::string& dir, int64_t n) {
  absl::StatusOr<RingCheckpoint> ring = LoadNewestRingCheckpoint(fs, dir, n);
  if (!ring.ok()) {
    return absl::Status(
        ring.status().code(),
        absl::StrCat("--init-from ", dir, ": ", ring.status().message()));
  }
  return std::move(ring->params);
}

absl::StatusOr<std::vector<float>> JobInitialValues(const v1::JobSpec& job,
                                                    const ModelDef& model) {
  if (job.init_from().empty()) return ModelJobInitialValues(model, job.seed());
  FileSystem* fs = PosixFileSystem();
  if (IsRingCheckpointDirectory(fs, job.init_from())) {
    // A ring job's checkpoint directory: its newest complete checkpoint's
    // parameters (and BatchNorm state), the optimizer state left behind as
    // an export would.
    ASSIGN_OR_RETURN(const ParameterLayout layout, ModelJobLayout(model));
    return RingCheckpointInitialValues(fs, job.init_from(),
                                       layout.total_elements());
  }
  absl::StatusOr<ModelValues> imported = ImportModel(job.init_from());
  if (!imported.ok()) return imported.status();
  if (absl::Status same = CheckSameModel(model, imported->def); !same.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--init-from ", job.init_from(), ": ", same.message()));
  }
  std::vector<float> values = std::move(imported->params);
  values.insert(values.end(), imported->state.begin(), imported->state.end());
  return values;
}

absl::StatusOr<int64_t> JobStateElements(const v1::JobSpec& job) {
  if (job.model().empty() && job.model_def().empty()) return 0;
  if (job.model_from_worker()) {  // its buffers: the last tensors
    ASSIGN_OR_RETURN(const ParameterLayout layout, JobTensorLayout(job));
    int64_t state = 0;
    for (int i = 0; i < job.tensors_size(); ++i) {
      if (job.tensors(i).buffer()) state += layout.tensors()[i].numel;
    }
    return state;
  }
  if (IsDlrmJob(job)) return 0;  // no BatchNorm in a DLRM
  ASSIGN_OR_RETURN(const ModelDef model, JobModel(job));
  ASSIGN_OR_RETURN(const ParameterLayout state, ModelStateLayout(model));
  return state.total_elements();
}

absl::StatusOr<ChunkCuts> JobChunkCuts(const v1::JobSpec& job,
                                       int64_t total_elements) {
  ChunkCuts cuts = job.pack_chunks() && job.pipeline_stages() <= 1
                       ? PackedChunkCuts()
                       : ChunkCuts();
  ASSIGN_OR_RETURN(const int64_t state, JobStateElements(job));
  if (state > 0) cuts.at.push_back(total_elements - state);
  return cuts;
}

absl::StatusOr<std::vector<Chunk>> JobChunks(const v1::JobSpec& job,
                                             const ParameterLayout& layout) {
  ASSIGN_OR_RETURN(const ChunkCuts cuts,
                   JobChunkCuts(job, layout.total_elements()));
  return PlaceChunks(layout.TensorSizes(), job.shard_addresses_size(),
                     job.max_chunk_elements() > 0 ? job.max_chunk_elements()
                                                  : kDefaultMaxChunkElements,
                     cuts);
}

absl::Status CheckModelForDistributedJob(const ModelDef& model, bool sync,
                                         int64_t global_batch, int workers) {
  for (size_t i = 0; i < model.layers.size(); ++i) {
    // Layers with buffers (BatchNorm's running statistics).
    if (LayerStateDefs(model.layers[i]).empty()) continue;
    const std::string layer = absl::StrCat(
        "layer ", i, " (", LayerTypeName(model.layers[i].type), ")");
    if (!sync) {
      return absl::InvalidArgumentError(
          absl::StrCat(layer,
                       ": BatchNorm's running statistics need sync steps; use "
                       "--consistency sync or the ring"));
    }
    if (global_batch < 2 * static_cast<int64_t>(workers)) {
      return absl::InvalidArgumentError(absl::StrCat(
          layer,
          ": BatchNorm trains on at least 2 samples per worker; --batch ",
          global_batch, " over ", workers, " workers gives fewer"));
    }
    return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status CheckJobTensors(const v1::JobSpec& job,
                             const ParameterLayout& layout) {
  if (job.tensors_size() == 0) return absl::OkStatus();
  bool same = job.tensors_size() == static_cast<int>(layout.tensors().size());
  for (int i = 0; same && i < job.tensors_size(); ++i) {
    const TensorSlot& slot = layout.tensors()[i];
    same =
        job.tensors(i).name() == slot.name &&
        std::equal(job.tensors(i).shape().begin(), job.tensors(i).shape().end(),
                   slot.shape.begin(), slot.shape.end());
  }
  if (same) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the job's tensor list does not match its model '", job.model(), "'"));
}

}  // namespace ferry

#include "server/coordinator_job.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_system.h"
#include "common/gradient_codec.h"
#include "common/log.h"
#include "common/sharding.h"
#include "common/status_macros.h"
#include "coordinator/step_rules.h"
#include "data/ctr_dataset.h"
#include "data/data_source.h"
#include "data/dlrm_job_check.h"
#include "model/dlrm_spec.h"
#include "model/dlrm_weights.h"
#include "model/model_export.h"
#include "model/model_params.h"
#include "model/model_presets.h"
#include "model/pipeline_split.h"
#include "pipeline/pipeline_options.h"
#include "pipeline/stage_memory.h"
#include "proto/job_convert.h"
#include "ps/dlrm_init.h"
#include "ps/job_tables.h"
#include "ps/sparse_store.h"
#include "ps/tables_file.h"

namespace ferry {
namespace {

// DDP's default bucket: 25 MiB of fp32.
constexpr int64_t kDefaultBucketElements = 25 * 1024 * 1024 / 4;

// The pipeline fields of `job` from the flags, checked against the model:
// ring mode or synchronous PS without a quorum (a replica's stages train
// one step together), a layer-stack model, a split the model takes, and
// with BatchNorm at least 2 samples per micro-batch when `workers` (the
// expected count) form their replicas.
absl::Status SetPipeline(const CoordinatorFlags& f, const ModelDef* dense,
                         int workers, v1::JobSpec& job) {
  if (f.pipeline.stages <= 1) {
    if (f.pipeline.given()) {
      return absl::InvalidArgumentError(
          "--micro-batches, --pipeline-schedule, --pipeline-split and "
          "--pipeline-balance need --pipeline-stages > 1");
    }
    return absl::OkStatus();
  }
  if (dense == nullptr) {
    return absl::InvalidArgumentError(
        "--pipeline-stages splits layer-stack models; a DLRM is not one");
  }
  {
    // The modes a pipeline runs in: the coordinator's own rules.
    v1::JobSpec with_stages = job;
    with_stages.set_pipeline_stages(f.pipeline.stages);
    RETURN_IF_ERROR(StepRules::For(with_stages, true).status());
  }
  if (f.pipeline.micro_batches > f.global_batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("--micro-batches (", f.pipeline.micro_batches,
                     ") must be <= --batch (", f.global_batch, ")"));
  }
  ASSIGN_OR_RETURN(const ParameterLayout state, ModelStateLayout(*dense));
  const int replicas = std::max(1, workers / std::max(1, f.pipeline.stages));
  // A replica trains its members' shares, a member alone its own.
  const int fewest = workers % std::max(1, f.pipeline.stages) == 0
                         ? f.global_batch / replicas
                         : f.global_batch / std::max(1, workers);
  if (state.total_elements() > 0 &&
      fewest / std::max(1, f.pipeline.micro_batches) < 2) {
    // BatchNorm normalizes each micro-batch with its own statistics.
    return absl::InvalidArgumentError(absl::StrCat(
        "--pipeline-stages: BatchNorm needs at least 2 samples per "
        "micro-batch; --batch ",
        f.global_batch, " over ", workers, " workers as ", replicas,
        " replicas in ", f.pipeline.micro_batches, " micro-batches has fewer"));
  }
  ASSIGN_OR_RETURN(const PipelineOptions p, ParsePipelineFlags(f.pipeline));
  absl::StatusOr<std::vector<StageRange>> split =
      SplitModel(*dense, p.stages, p.split, p.balance);
  if (!split.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--pipeline-stages: ", split.status().message()));
  }
  job.set_pipeline_stages(p.stages);
  job.set_micro_batches(p.micro_batches);
  job.set_pipeline_schedule(PipelineScheduleName(p.schedule));
  job.set_pipeline_balance(StageBalanceName(p.balance));
  // The split the workers use, explicit, so every worker agrees on it.
  for (size_t s = 1; s < split->size(); ++s) {
    job.add_pipeline_split((*split)[s].first_layer);
  }
  LogInfo("pipeline job", {{"stages", p.stages},
                           {"split", StageRangesString(*split)},
                           {"micro_batches", p.micro_batches},
                           {"schedule", job.pipeline_schedule()}});
  return absl::OkStatus();
}

// JobSpec.worker_memory_budget_bytes from --worker-memory-budget, checked
// against what one worker of the job holds (pipeline/stage_memory.h): in PS
// mode a pipeline stage (no optimizer state: the shards keep it), in ring
// mode the whole model with its optimizer state (every member keeps every
// stage). The batch is the global batch, a lone replica's. Call after
// SetPipeline.
absl::Status SetMemoryBudget(const CoordinatorFlags& f, const ModelDef* dense,
                             int workers, v1::JobSpec& job) {
  if (f.worker_memory_budget.empty()) return absl::OkStatus();
  absl::StatusOr<int64_t> budget = ParseByteSize(f.worker_memory_budget);
  if (!budget.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--worker-memory-budget: ", budget.status().message()));
  }
  if (dense == nullptr) {
    return absl::InvalidArgumentError(
        "--worker-memory-budget applies to layer-stack models; a DLRM's "
        "tables live on the shards");
  }
  const bool ring = job.mode() != v1::MODE_PS;
  const int stages = ring ? 1 : std::max(1, job.pipeline_stages());
  if (stages > 1 && workers < stages) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--worker-memory-budget: a PS pipeline under a budget trains whole "
        "replicas only, and ",
        workers, " expected workers are fewer than --pipeline-stages (", stages,
        ")"));
  }
  if (stages > 1 && FromProto(job.compression()).uses_feedback()) {
    return absl::InvalidArgumentError(
        "--worker-memory-budget: --error-feedback keeps a residual of the "
        "whole model on every worker; a PS pipeline under a budget cannot "
        "take it");
  }
  ASSIGN_OR_RETURN(const PipelineOptions p, JobPipelineOptions(job));
  ASSIGN_OR_RETURN(
      const std::vector<StageRange> split,
      SplitModel(*dense, stages, stages > 1 ? p.split : std::vector<int>{},
                 p.balance));
  // More stages do not help a ring member, which holds the whole model.
  RETURN_IF_ERROR(CheckPipelineMemory(
      *dense, split, job.global_batch(), p.micro_batches, p.schedule,
      ring ? OptimizerStateBuffers(FromProto(job.optimizer()).kind) : 0,
      *budget,
      ring ? "in ring mode every member holds the whole model, whatever "
             "--pipeline-stages: use --mode ps (each pipeline stage's workers "
             "hold only that stage) or raise --worker-memory-budget"
           : kPipelineMemoryRemedy));
  job.set_worker_memory_budget_bytes(*budget);
  return absl::OkStatus();
}

// The job's spec for a model whose JSON is `model_def` and whose flat buffer
// is `layout`; `dense` is the model when it is a layer stack (nullptr for a
// DLRM: its checks are done by the caller).
absl::StatusOr<v1::JobSpec> BuildJob(const CoordinatorFlags& f,
                                     const std::string& model_def,
                                     const ModelDef* dense,
                                     const ParameterLayout& layout,
                                     int64_t epoch_size) {
  v1::JobSpec job;
  job.set_job_id(f.job_id);
  job.set_model(f.model);
  job.set_model_def(model_def);
  job.set_init_from(f.init_from);
  if (dense != nullptr && !f.init_from.empty()) {
    // Refused now rather than by every shard.
    RETURN_IF_ERROR(JobInitialValues(job, *dense).status());
  }
  job.set_dataset(f.dataset);
  job.set_data_dir(f.data_dir);
  job.set_global_batch(f.global_batch);
  job.set_epochs(f.epochs);
  job.set_seed(f.seed);
  ASSIGN_OR_RETURN(v1::Mode mode, ParseMode(f.mode));
  job.set_mode(mode);
  v1::Consistency consistency;
  int staleness = 0;
  RETURN_IF_ERROR(ParseConsistency(f.consistency, &consistency, &staleness));
  job.set_consistency(consistency);
  job.set_staleness(staleness);
  job.set_sync_quorum(f.sync_quorum);
  if (f.sum_on_arrival) {
    if (mode != v1::MODE_PS || consistency != v1::CONSISTENCY_SYNC ||
        f.sync_quorum > 0) {
      return absl::InvalidArgumentError(
          "--sum-on-arrival needs --mode ps with --consistency sync and no "
          "--sync-quorum: a step must apply every push its shards summed");
    }
    job.set_sum_on_arrival(true);
  }
  if (ModeHasShards(mode) && f.shards.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        ModeName(mode), " mode needs --shards HOST:PORT[,HOST:PORT...]"));
  }
  for (const std::string& s : f.shards) job.add_shard_addresses(s);
  job.set_max_chunk_elements(f.max_chunk_elements > 0
                                 ? f.max_chunk_elements
                                 : kDefaultMaxChunkElements);
  job.set_pack_chunks(f.pack_chunks);
  job.set_bucket_elements(f.bucket_elements > 0 ? f.bucket_elements
                                                : kDefaultBucketElements);
  job.set_max_steps(f.max_steps);
  if (f.digest_every < 0) {
    return absl::InvalidArgumentError("--digest-every must be >= 0");
  }
  job.set_digest_every(f.digest_every);
  if (!f.ring_checkpoint_dir.empty()) {
    if (mode != v1::MODE_RING && mode != v1::MODE_HYBRID) {
      return absl::InvalidArgumentError(
          "--ring-checkpoint-dir is for ring and hybrid mode (PS shards "
          "take --checkpoint-dir)");
    }
    job.set_ring_checkpoint_dir(f.ring_checkpoint_dir);
  }
  if (f.ring_checkpoint_writers == "rank0") {
    if (f.ring_checkpoint_dir.empty()) {
      return absl::InvalidArgumentError(
          "--ring-checkpoint-writers rank0 needs --ring-checkpoint-dir");
    }
    if (f.pipeline.stages > 1) {
      return absl::InvalidArgumentError(
          "--ring-checkpoint-writers rank0 does not fit --pipeline-stages: "
          "rank 0 holds only its own stage current; use all");
    }
    job.set_ring_checkpoint_rank0(true);
  } else if (f.ring_checkpoint_writers != "all") {
    return absl::InvalidArgumentError(
        absl::StrCat("--ring-checkpoint-writers '", f.ring_checkpoint_writers,
                     "': expected all or rank0"));
  }
  if (f.ring_shard_optimizer_state) {
    if (mode != v1::MODE_RING) {
      return absl::InvalidArgumentError(
          "--ring-shard-optimizer-state is for --mode ring (PS shards hold "
          "the optimizer state already)");
    }
    if (f.ring_checkpoint_dir.empty()) {
      return absl::InvalidArgumentError(
          "--ring-shard-optimizer-state needs --ring-checkpoint-dir: each "
          "member holds the only copy of its slice of the optimizer state, "
          "so a ring that loses a member goes back to the newest ring "
          "checkpoint");
    }
    const absl::StatusOr<GradientCompression> compression =
        ParseCompression(f.compression, f.error_feedback);
    if (f.pipeline.stages > 1 || f.ring_checkpoint_writers != "all" ||
        (compression.ok() && compression->compressed())) {
      return absl::InvalidArgumentError(
          "--ring-shard-optimizer-state does not go with --pipeline-stages, "
          "--ring-checkpoint-writers rank0 or --compression (the slices are "
          "reduce-scattered in fp32)");
    }
    job.set_ring_shard_optimizer_state(true);
  }
  {
    absl::StatusOr<GradientCompression> c =
        ParseCompression(f.compression, f.error_feedback);
    if (!c.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--compression: ", c.status().message()));
    }
    *job.mutable_compression() = ToProto(*c);
  }
  for (const TensorSlot& t : layout.tensors()) {
    v1::TensorSpec* spec = job.add_tensors();
    spec->set_name(t.name);
    for (int64_t d : t.shape) spec->add_shape(d);
  }
  // The schedule counts optimizer updates: one per step in sync mode, one
  // per push (global_batch / workers samples, each applied with the rate
  // times its share of the global batch) in async mode.
  OptimizerConfig optimizer = f.optimizer;
  const int64_t steps_per_epoch =
      (epoch_size + f.global_batch - 1) / f.global_batch;
  const int workers =
      std::max({1, f.expected_workers > 0 ? f.expected_workers : f.min_workers,
                f.expected_workers > 0 ? 0 : f.start_workers});
  if (dense != nullptr) {
    RETURN_IF_ERROR(CheckModelForDistributedJob(
        *dense, ModeHasRing(mode) || consistency == v1::CONSISTENCY_SYNC,
        f.global_batch, workers));
  }
  if (consistency != v1::CONSISTENCY_SYNC) {
    ScheduleInUpdates(optimizer, workers);
  }
  ResolveScheduleLength(optimizer,
                        consistency == v1::CONSISTENCY_SYNC
                            ? steps_per_epoch
                            : steps_per_epoch * workers,
                        f.epochs);
  RETURN_IF_ERROR(ValidateOptimizerConfig(optimizer));
  *job.mutable_optimizer() = ToProto(optimizer);
  RETURN_IF_ERROR(SetPipeline(f, dense, workers, job));
  RETURN_IF_ERROR(SetMemoryBudget(f, dense, workers, job));
  return job;
}

absl::StatusOr<CoordinatorJob> BuildDlrmJob(const CoordinatorFlags& f) {
  // The flags first: nothing is read for a job that cannot run.
  ASSIGN_OR_RETURN(const DlrmSpec spec, ResolveCriteoDlrm(f.model, f.dataset));
  RETURN_IF_ERROR(ValidateEmbeddingOptions(f.embedding));
  RETURN_IF_ERROR(CheckDistributedDlrmFlags(
      f.mode, f.export_dir, f.ring_full_table_rows, f.embedding));
  RETURN_IF_ERROR(
      CheckRingFullTableRows(f.mode, f.ring_full_table_rows, f.model, &spec));
  if (!f.init_from.empty() && f.ring_full_table_rows > 0) {
    return absl::InvalidArgumentError(
        "--init-from with --ring-full-table-rows: full tables hold ids mod "
        "that many rows and cannot start from an export's rows");
  }
  if (!f.init_from.empty() &&
      IsRingCheckpointDirectory(PosixFileSystem(), f.init_from)) {
    // A ring DLRM's checkpoint directory: its newest complete checkpoint
    // must hold this model's dense state and tables (the members or shards
    // read them again).
    ASSIGN_OR_RETURN(const ParameterLayout dense, DlrmParameterLayout(spec));
    ASSIGN_OR_RETURN(
        const std::unique_ptr<SparseStore> store,
        SparseStore::Create(DlrmTablesConfig(spec, f.embedding, f.seed)));
    absl::Status usable = RestoreDlrmInitTables(
        f.init_from, dense.total_elements(), *store, TableScope::kAll);
    if (!usable.ok()) {
      return absl::Status(usable.code(),
                          absl::StrCat("--init-from ", usable.message()));
    }
  } else if (!f.init_from.empty()) {
    // A DLRM export: its dense half is read here (the job's model), its
    // tables by the shards or ring members; refused now rather than by
    // each of them.
    DlrmTablesMeta exported;
    absl::Status usable =
        ReadDlrmWeights(f.init_from, spec, PosixFileSystem(), &exported)
            .status();
    if (usable.ok()) {
      usable = CheckTablesMetaFits(
          exported, TablesMetaOf(MakeSparseStoreConfig(f.embedding, {}, f.seed),
                                 spec.embedding_dim));
    }
    if (usable.ok()) {
      absl::StatusOr<std::vector<std::string>> files =
          PosixFileSystem()->ListDirectory(f.init_from);
      usable = files.status();
      if (files.ok() && std::find(files->begin(), files->end(),
                                  kDlrmEmbeddingsFile) == files->end()) {
        usable = absl::NotFoundError(
            absl::StrCat(kDlrmEmbeddingsFile, " is missing"));
      }
    }
    if (!usable.ok()) {
      return absl::Status(
          usable.code(),
          absl::StrCat("--init-from ", f.init_from, ": ", usable.message()));
    }
  }
  ASSIGN_OR_RETURN(const ParameterLayout layout, DlrmParameterLayout(spec));
  ASSIGN_OR_RETURN(const std::string dir, ParseCtrDatasetSpec(f.dataset));
  ASSIGN_OR_RETURN(const std::string train_path, FindCtrFile(dir, "train"));
  ASSIGN_OR_RETURN(const std::string test_path, FindCtrFile(dir, "test"));
  CoordinatorJob out;
  // Only the size of the training split is needed here (the workers load
  // it): counted while streaming, nothing kept.
  ASSIGN_OR_RETURN(out.epoch_size, CountCtrExamples(train_path));
  ASSIGN_OR_RETURN(CtrDataset test, CtrDataset::LoadFile(test_path));
  LogInfo("CTR data read",
          {{"train_examples", out.epoch_size}, {"test", test.load_summary()}});
  if (f.ring_shard_optimizer_state) {
    return absl::InvalidArgumentError(
        "--ring-shard-optimizer-state is for dense models: a DLRM's ring "
        "members keep whole embedding tables");
  }
  ASSIGN_OR_RETURN(out.job, BuildJob(f, DlrmToJson(spec), /*dense=*/nullptr,
                                     layout, out.epoch_size));
  *out.job.mutable_embedding() = ToProto(f.embedding);
  out.job.mutable_embedding()->set_ring_full_table_rows(f.ring_full_table_rows);
  out.test_set = std::move(test);
  return out;
}

// A job whose model comes from its first worker (a ferry.torch script):
// no tensors until it is defined, no test set (the script evaluates).
absl::StatusOr<CoordinatorJob> BuildWorkerModelJob(const CoordinatorFlags& f) {
  ASSIGN_OR_RETURN(const v1::Mode mode, ParseMode(f.mode));
  if (mode == v1::MODE_HYBRID) {
    return absl::InvalidArgumentError(
        "--model external trains in --mode ps or ring; hybrid mode is for "
        "DLRM models");
  }
  if (!f.init_from.empty()) {  // read again by the model intake
    RETURN_IF_ERROR(ReadWeightsFile(PosixFileSystem(),
                                    JoinPath(f.init_from, kModelWeightsFile))
                        .status());
  }
  if (f.pipeline.stages > 1 || !f.worker_memory_budget.empty()) {
    return absl::InvalidArgumentError(
        "--model external: --pipeline-stages and --worker-memory-budget need "
        "ferry's own layer-stack models");
  }
  CoordinatorJob out;
  ASSIGN_OR_RETURN(out.epoch_size, ParseExternalDatasetSpec(f.dataset));
  ASSIGN_OR_RETURN(out.job, BuildJob(f, /*model_def=*/"", /*dense=*/nullptr,
                                     ParameterLayout(), out.epoch_size));
  out.job.set_model("external");
  out.job.set_model_from_worker(true);
  // The shards and members start from the coordinator's values
  // (ModelValues), which --init-from sets; they read no directory.
  out.job.clear_init_from();
  return out;
}

}  // namespace

absl::StatusOr<CoordinatorJob> BuildCoordinatorJob(const CoordinatorFlags& f) {
  RETURN_IF_ERROR(ParseMode(f.mode).status());
  if (f.model == "external") return BuildWorkerModelJob(f);
  const bool dlrm = IsDlrmModelText(f.model);
  RETURN_IF_ERROR(
      CheckEmbeddingFlagsFitModel(f.embedding_given, dlrm, f.model));
  if (dlrm) return BuildDlrmJob(f);
  RETURN_IF_ERROR(CheckRingFullTableRows(f.mode, f.ring_full_table_rows,
                                         f.model, /*spec=*/nullptr));

  RETURN_IF_ERROR(CheckModeFitsModel(f.mode, dlrm, f.model));
  ASSIGN_OR_RETURN(const ModelDef model, ResolveModelSpec(f.model));
  ASSIGN_OR_RETURN(const ParameterLayout layout, ModelJobLayout(model));
  ASSIGN_OR_RETURN(TrainTestData data,
                   LoadTrainTest(f.dataset, f.data_dir, model, f.seed));
  CoordinatorJob out;
  // Only the size of the training set is needed here (the workers load
  // it): its samples (188 MB for Fashion-MNIST) go when `data` does.
  out.epoch_size = data.train.num_samples;
  ASSIGN_OR_RETURN(
      out.job, BuildJob(f, ModelToJson(model), &model, layout, out.epoch_size));
  out.test_set = std::move(data.test);
  return out;
}

}  // namespace ferry

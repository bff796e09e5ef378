#include "worker/standalone_trainer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "data/criteo_format.h"
#include "data/ctr_dataset.h"
#include "model/dlrm_spec.h"
#include "model/model_presets.h"
#include "proto/job_convert.h"
#include "worker/standalone_loop.h"

namespace ferry {
namespace {

// A DLRM's checks, with the flags' names, and its model_def.
absl::Status SetDlrm(const TrainOptions& options, v1::JobSpec& job) {
  if (options.evaluate_only && options.init_from.empty()) {
    return absl::InvalidArgumentError(
        "--evaluate-only needs --init-from DIR (a DLRM --export wrote)");
  }
  if (!IsCtrDatasetSpec(options.dataset)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--model ", options.model,
        " is a DLRM CTR model: it trains on --dataset criteo:DIR (Criteo TSV "
        "files; `ferry data ctr --out DIR` writes some), not '",
        options.dataset, "'"));
  }
  if (options.pipeline.has_value()) {
    return absl::InvalidArgumentError(
        "pipeline stages split sequential models; a DLRM is not one");
  }
  RETURN_IF_ERROR(ValidateEmbeddingOptions(options.embedding));
  ASSIGN_OR_RETURN(const DlrmSpec spec, ResolveDlrmSpec(options.model));
  if (spec.dense_features != kCriteoDense ||
      spec.num_fields != kCriteoCategorical) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--model %s has %d dense features and %d categorical fields; Criteo "
        "data (--dataset %s) has %d and %d",
        options.model, spec.dense_features, spec.num_fields, options.dataset,
        kCriteoDense, kCriteoCategorical));
  }
  job.set_model_def(DlrmToJson(spec));
  *job.mutable_embedding() = ToProto(options.embedding);
  return absl::OkStatus();
}

// A layer stack's checks and its pipeline fields.
absl::Status SetLayerStack(const TrainOptions& options, v1::JobSpec& job) {
  if (IsCtrDatasetSpec(options.dataset)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--dataset ", options.dataset,
        " holds CTR examples (13 integer and 26 categorical features): train "
        "a DLRM model on it (--model dlrm, or a JSON file with \"kind\": "
        "\"dlrm\"), not --model ",
        options.model));
  }
  RETURN_IF_ERROR(ResolveModelSpec(options.model).status());
  if (!options.pipeline.has_value() && options.memory_budget_bytes <= 0) {
    return absl::OkStatus();
  }
  const PipelineOptions p = options.pipeline.value_or(PipelineOptions());
  if (p.micro_batches < 1 || p.micro_batches > options.batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("--micro-batches must be in [1, --batch = ", options.batch,
                     "], got ", p.micro_batches));
  }
  job.set_pipeline_stages(std::max(1, p.stages));
  job.set_micro_batches(p.micro_batches);
  job.set_pipeline_schedule(PipelineScheduleName(p.schedule));
  job.set_pipeline_balance(StageBalanceName(p.balance));
  for (int first : p.split) job.add_pipeline_split(first);
  job.set_worker_memory_budget_bytes(options.memory_budget_bytes);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::JobSpec> StandaloneJob(const TrainOptions& options) {
  if (options.batch <= 0 || options.epochs <= 0) {
    return absl::InvalidArgumentError("batch and epochs must be > 0");
  }
  v1::JobSpec job;
  job.set_job_id("standalone");
  job.set_model(options.model);
  job.set_dataset(options.dataset);
  job.set_data_dir(options.data_dir);
  *job.mutable_optimizer() = ToProto(options.optimizer);
  job.set_global_batch(options.batch);
  job.set_epochs(options.epochs);
  job.set_seed(options.seed);
  job.set_max_steps(options.max_steps);
  job.set_init_from(options.init_from);
  if (IsDlrmModelText(options.model)) {
    RETURN_IF_ERROR(SetDlrm(options, job));
  } else {
    RETURN_IF_ERROR(SetLayerStack(options, job));
  }
  return job;
}

absl::StatusOr<TrainSummary> RunStandalone(const TrainOptions& options,
                                           ProgressPrinter& progress) {
  ASSIGN_OR_RETURN(const v1::JobSpec job, StandaloneJob(options));
  LocalRunOptions run;
  run.device = options.device;
  run.threads = options.threads;
  run.evaluate_only = options.evaluate_only;
  run.export_dir = options.export_dir;
  return RunLocalJob(job, run, progress);
}

}  // namespace ferry

#include "worker/standalone_trainer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "compute/optimizer.h"
#include "data/batch_stager.h"
#include "data/ctr_dataset.h"
#include "data/data_source.h"
#include "data/evaluator.h"
#include "data/sampler.h"
#include "model/model_export.h"
#include "model/model_presets.h"
#include "model/sequential_model.h"

namespace ferry {

nlohmann::json TrainSummary::ToJson() const {
  nlohmann::json epochs_json = nlohmann::json::array();
  for (const EpochStats& e : per_epoch) {
    epochs_json.push_back({{"epoch", e.epoch},
                           {"train_loss", e.train_loss},
                           {"train_accuracy", e.train_accuracy},
                           {"test_accuracy", e.test_accuracy},
                           {"seconds", e.seconds}});
  }
  nlohmann::json out = {{"epochs", epochs},
                        {"steps", steps},
                        {"wall_seconds", wall_seconds},
                        {"samples_per_second", samples_per_second},
                        {"test_accuracy", test_accuracy},
                        {"final_loss", final_loss},
                        {"device", device},
                        {"per_epoch", epochs_json}};
  if (!pipeline.is_null()) out["pipeline"] = pipeline;
  return out;
}

void RecordEpoch(TrainSummary& summary, int epoch, int epochs, double loss_sum,
                 int64_t correct, int64_t seen, double test_accuracy,
                 double train_seconds, double seconds,
                 ProgressPrinter& progress) {
  EpochStats stats;
  stats.epoch = epoch + 1;
  stats.train_loss = seen > 0 ? loss_sum / seen : 0.0;
  stats.train_accuracy = seen > 0 ? static_cast<double>(correct) / seen : 0.0;
  stats.test_accuracy = test_accuracy;
  stats.seconds = seconds;
  summary.per_epoch.push_back(stats);
  progress.Line(absl::StrFormat(
      "epoch %2d/%d  loss %.4f  train acc %.4f  test acc %.4f  %.0f "
      "samples/s",
      stats.epoch, epochs, stats.train_loss, stats.train_accuracy,
      stats.test_accuracy, seen / std::max(1e-9, train_seconds)));
}

void CloseSummary(TrainSummary& summary, int64_t trained_samples,
                  double train_seconds) {
  summary.epochs = static_cast<int>(summary.per_epoch.size());
  summary.test_accuracy = summary.per_epoch.back().test_accuracy;
  summary.final_loss = summary.per_epoch.back().train_loss;
  summary.samples_per_second = trained_samples / std::max(1e-9, train_seconds);
}

absl::StatusOr<TrainSummary> RunStandalone(const TrainOptions& options,
                                           ProgressPrinter& progress) {
  const absl::Time start = absl::Now();
  if (options.batch <= 0 || options.epochs <= 0) {
    return absl::InvalidArgumentError("batch and epochs must be > 0");
  }
  if (IsCtrDatasetSpec(options.dataset)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--dataset ", options.dataset,
        " holds CTR examples (13 integer and 26 categorical features): train "
        "a DLRM model on it (--model dlrm, or a JSON file with \"kind\": "
        "\"dlrm\"), not --model ",
        options.model));
  }
  ASSIGN_OR_RETURN(ModelDef def, ResolveModelSpec(options.model));
  std::optional<ModelValues> start_from;
  if (!options.init_from.empty()) {
    ASSIGN_OR_RETURN(start_from, ImportModel(options.init_from));
    if (absl::Status same = CheckSameModel(def, start_from->def); !same.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--init-from ", options.init_from, ": ", same.message()));
    }
  }
  ASSIGN_OR_RETURN(auto backend, MakeBackend(options.device, options.threads));
  ASSIGN_OR_RETURN(SequentialModel model,
                   SequentialModel::Create(def, backend.get()));
  ASSIGN_OR_RETURN(
      TrainTestData data,
      LoadTrainTest(options.dataset, options.data_dir, def, options.seed));

  const int64_t n = data.train.num_samples;
  const int64_t steps_per_epoch = (n + options.batch - 1) / options.batch;
  OptimizerConfig opt_config = options.optimizer;
  ResolveScheduleLength(opt_config, steps_per_epoch, options.epochs);

  const size_t num_params = model.layout().total_elements();
  ASSIGN_OR_RETURN(DeviceBuffer params, backend->Allocate(num_params));
  ASSIGN_OR_RETURN(DeviceBuffer grads, backend->Allocate(num_params));
  const std::vector<float> init =
      start_from ? start_from->params : model.InitialParameters(options.seed);
  if (start_from && !start_from->state.empty()) {
    RETURN_IF_ERROR(model.SetState(start_from->state));
  }
  RETURN_IF_ERROR(
      backend->CopyToDevice(init.data(), num_params, params.data()));
  ASSIGN_OR_RETURN(Optimizer optimizer,
                   Optimizer::Create(opt_config, backend.get(), num_params));
  ASSIGN_OR_RETURN(
      BatchStager stager,
      BatchStager::Create(backend.get(), model.input_dim(), options.batch));

  TrainSummary summary;
  summary.device = backend->Name();
  double train_seconds = 0;
  int64_t trained_samples = 0;
  progress.Line(absl::StrFormat(
      "standalone: model %s (%d parameters), %s, %d train / %d test samples, "
      "batch %d, %s lr %g, device %s",
      options.model, num_params, options.dataset, n, data.test.num_samples,
      options.batch, OptimizerKindName(opt_config.kind), opt_config.lr,
      summary.device));

  if (options.evaluate_only) {
    ASSIGN_OR_RETURN(EvalResult eval,
                     EvaluateDataset(model, params.data(), data.test, stager,
                                     options.batch));
    summary.test_accuracy = eval.accuracy;
    summary.final_loss = eval.mean_loss;
    summary.final_parameters = init;
    summary.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start);
    return summary;
  }
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    const absl::Time epoch_start = absl::Now();
    const std::vector<int64_t> order =
        EpochPermutation(n, options.seed, epoch, options.shuffle);
    double loss_sum = 0;
    int64_t correct = 0, seen = 0;
    for (int64_t begin = 0; begin < n; begin += options.batch) {
      if (options.max_steps > 0 && summary.steps >= options.max_steps) break;
      const int b =
          static_cast<int>(std::min<int64_t>(options.batch, n - begin));
      RETURN_IF_ERROR(stager.Stage(
          data.train, absl::MakeConstSpan(order).subspan(begin, b)));
      ASSIGN_OR_RETURN(LossStats stats,
                       model.ForwardBackward(
                           params.data(), stager.inputs(), stager.labels(), b,
                           1.0f / b, grads.data(), {},
                           EpochPositionContext(options.seed, epoch, begin)));
      RETURN_IF_ERROR(optimizer.Apply(grads.data(), params.data()));
      loss_sum += stats.loss_sum;
      correct += stats.correct;
      seen += b;
      ++summary.steps;
      if (summary.steps % 50 == 0) {
        progress.Update(static_cast<double>(begin + b) / n,
                        absl::StrFormat("epoch %d/%d loss %.4f", epoch + 1,
                                        options.epochs, loss_sum / seen));
      }
    }
    RETURN_IF_ERROR(backend->Synchronize());
    const double epoch_train_seconds =
        absl::ToDoubleSeconds(absl::Now() - epoch_start);
    train_seconds += epoch_train_seconds;
    trained_samples += seen;
    ASSIGN_OR_RETURN(EvalResult eval,
                     EvaluateDataset(model, params.data(), data.test, stager,
                                     options.batch));
    RecordEpoch(summary, epoch, options.epochs, loss_sum, correct, seen,
                eval.accuracy, epoch_train_seconds,
                absl::ToDoubleSeconds(absl::Now() - epoch_start), progress);
    if (options.max_steps > 0 && summary.steps >= options.max_steps) break;
  }
  CloseSummary(summary, trained_samples, train_seconds);
  summary.final_parameters.resize(num_params);
  RETURN_IF_ERROR(backend->CopyToHost(params.data(), num_params,
                                      summary.final_parameters.data()));
  if (!options.export_dir.empty()) {
    ModelValues trained;
    trained.def = def;
    trained.params = summary.final_parameters;
    ASSIGN_OR_RETURN(trained.state, model.GetState());
    RETURN_IF_ERROR(ExportModel(options.export_dir, trained));
    progress.Line(
        absl::StrFormat("exported the model to %s (model.json, "
                        "model.safetensors)",
                        options.export_dir));
  }
  summary.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return summary;
}

}  // namespace ferry

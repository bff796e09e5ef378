#include "worker/standalone_loop.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/optimizer_config.h"
#include "common/status_macros.h"
#include "proto/job_convert.h"
#include "worker/local_exchange.h"
#include "worker/local_task_source.h"
#include "worker/standalone_model.h"

namespace ferry {
namespace {

double SecondsSince(absl::Time start) {
  return absl::ToDoubleSeconds(absl::Now() - start);
}

// A terminal gets a redrawn line every 50 steps; logs get a line at every
// tenth of a long epoch.
void ShowStep(const LocalTaskSource& source, int64_t epoch_step,
              int64_t steps_per_epoch, double loss_sum, int64_t seen,
              absl::Time epoch_start, ProgressPrinter& progress) {
  const bool log_line = !progress.interactive() && steps_per_epoch >= 100 &&
                        epoch_step % (steps_per_epoch / 10) == 0 &&
                        epoch_step < steps_per_epoch;
  if (source.steps() % 50 != 0 && !log_line) return;
  const std::string text = absl::StrFormat(
      "epoch %d/%d step %d/%d loss %.4f %.0f samples/s", source.epoch() + 1,
      source.epochs(), epoch_step, steps_per_epoch, loss_sum / seen,
      seen / std::max(1e-9, SecondsSince(epoch_start)));
  if (log_line) {
    progress.Line(text);
  } else {
    progress.Update(
        static_cast<double>(source.position()) / source.epoch_size(), text);
  }
}

// Trains every epoch of `source` through `exchange`, scoring each.
absl::Status TrainEpochs(LeaseTrainer& trainer, LocalExchange& exchange,
                         StandaloneModel& model, LocalTaskSource& source,
                         int64_t steps_per_epoch, TrainSummary& summary,
                         ProgressPrinter& progress) {
  double train_seconds = 0.0, unique_ids = 0.0;
  int64_t trained_samples = 0;
  while (source.NextEpoch()) {
    const absl::Time epoch_start = absl::Now();
    double loss_sum = 0.0;
    int64_t correct = 0, seen = 0, epoch_step = 0;
    while (std::optional<v1::NextTaskResponse> lease = source.Next()) {
      absl::StatusOr<StepResult> step =
          trainer.Train(*lease, /*generation=*/0, exchange, *RealClock());
      if (!step.ok()) {
        exchange.AbandonStep();
        return step.status();
      }
      if (!std::isfinite(step->stats.loss_sum)) {
        return absl::InternalError(absl::StrFormat(
            "the training loss diverged at step %d (epoch %d): lower --lr "
            "(or --embedding-lr)",
            lease->step(), source.epoch() + 1));
      }
      loss_sum += step->stats.loss_sum;
      correct += step->stats.correct;
      seen += step->samples;
      unique_ids += static_cast<double>(step->unique_ids);
      ShowStep(source, ++epoch_step, steps_per_epoch, loss_sum, seen,
               epoch_start, progress);
    }
    RETURN_IF_ERROR(trainer.backend()->Synchronize());
    const double epoch_train_seconds = SecondsSince(epoch_start);
    train_seconds += epoch_train_seconds;
    trained_samples += seen;
    ASSIGN_OR_RETURN(const std::vector<float> weights, exchange.FinalWeights());
    EpochStats stats;
    stats.epoch = source.epoch() + 1;
    ASSIGN_OR_RETURN(stats.test, model.Evaluate(weights));
    stats.train_loss = seen > 0 ? loss_sum / seen : 0.0;
    stats.train_accuracy = seen > 0 ? static_cast<double>(correct) / seen : 0.0;
    stats.samples_per_second = seen / std::max(1e-9, epoch_train_seconds);
    stats.seconds = SecondsSince(epoch_start);
    RecordEpoch(summary, stats, source.epochs(), progress);
  }
  summary.steps = source.steps();
  summary.epochs = static_cast<int>(summary.per_epoch.size());
  if (!summary.per_epoch.empty()) {
    summary.test = summary.per_epoch.back().test;
    summary.final_loss = summary.per_epoch.back().train_loss;
  }
  summary.samples_per_second = trained_samples / std::max(1e-9, train_seconds);
  summary.unique_ids_per_step =
      summary.steps > 0 ? unique_ids / summary.steps : 0.0;
  return absl::OkStatus();
}

absl::StatusOr<TrainSummary> EvaluateOnly(StandaloneModel& model,
                                          std::vector<float> weights,
                                          ProgressPrinter& progress) {
  progress.Line(absl::StrCat("evaluate only: ", model.Describe()));
  TrainSummary summary;
  summary.device = "cpu";
  ASSIGN_OR_RETURN(summary.test, model.Evaluate(weights));
  summary.final_loss = summary.test.loss;
  weights.resize(model.parameter_elements());
  summary.final_parameters = std::move(weights);
  summary.family = model.SummaryJson();
  return summary;
}

}  // namespace

absl::StatusOr<TrainSummary> RunLocalJob(const v1::JobSpec& job,
                                         const LocalRunOptions& options,
                                         ProgressPrinter& progress) {
  const absl::Time start = absl::Now();
  if (job.global_batch() <= 0 || job.epochs() <= 0) {
    return absl::InvalidArgumentError("batch and epochs must be > 0");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<StandaloneModel> model,
                   StandaloneModel::ForJob(job));
  ASSIGN_OR_RETURN(std::vector<float> initial, model->InitialWeights());
  if (options.evaluate_only) {
    ASSIGN_OR_RETURN(TrainSummary summary,
                     EvaluateOnly(*model, std::move(initial), progress));
    summary.wall_seconds = SecondsSince(start);
    return summary;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<LeaseTrainer> trainer,
                   MakeLocalLeaseTrainer(job, options.device, options.threads));
  const ExchangeBuffers& buffers = trainer->buffers();
  if (static_cast<int64_t>(initial.size()) != buffers.num_elements) {
    return absl::InvalidArgumentError(
        absl::StrFormat("the starting weights hold %d values; the model has %d",
                        initial.size(), buffers.num_elements));
  }
  ComputeBackend* backend = trainer->backend();
  RETURN_IF_ERROR(backend->CopyToDevice(initial.data(), buffers.num_elements,
                                        buffers.params));

  const int64_t n = trainer->train_samples();
  const int64_t steps_per_epoch =
      (n + job.global_batch() - 1) / job.global_batch();
  LocalExchangeOptions exchange_options;
  exchange_options.backend = backend;
  exchange_options.buffers = buffers;
  ASSIGN_OR_RETURN(exchange_options.optimizer, JobOptimizer(job));
  ResolveScheduleLength(exchange_options.optimizer, steps_per_epoch,
                        job.epochs());
  exchange_options.state_elements =
      buffers.num_elements - model->parameter_elements();
  exchange_options.tables = model->tables();
  const OptimizerConfig opt = exchange_options.optimizer;
  ASSIGN_OR_RETURN(std::unique_ptr<LocalExchange> exchange,
                   LocalExchange::Create(std::move(exchange_options)));

  TrainSummary summary;
  summary.device = backend->Name();
  progress.Line(absl::StrFormat(
      "standalone: %s, %d train samples, batch %d, %s lr %g, device %s",
      model->Describe(), n, job.global_batch(), OptimizerKindName(opt.kind),
      opt.lr, summary.device));
  LocalTaskSource source(n, job.global_batch(), job.epochs(), job.max_steps());
  RETURN_IF_ERROR(TrainEpochs(*trainer, *exchange, *model, source,
                              steps_per_epoch, summary, progress));
  ASSIGN_OR_RETURN(std::vector<float> weights, exchange->FinalWeights());
  if (!options.export_dir.empty()) {
    RETURN_IF_ERROR(model->Export(options.export_dir, weights));
    progress.Line(
        absl::StrFormat("exported the model to %s", options.export_dir));
  }
  summary.family = model->SummaryJson();
  const nlohmann::json trainer_keys = trainer->SummaryJson();
  if (trainer_keys.is_object()) {
    if (!summary.family.is_object()) summary.family = nlohmann::json::object();
    summary.family.update(trainer_keys);
  }
  weights.resize(model->parameter_elements());
  summary.final_parameters = std::move(weights);
  summary.wall_seconds = SecondsSince(start);
  return summary;
}

}  // namespace ferry

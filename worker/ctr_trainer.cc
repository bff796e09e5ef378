#include "worker/ctr_trainer.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "compute/optimizer.h"
#include "data/criteo_format.h"
#include "data/ctr_dataset.h"
#include "data/ctr_metrics.h"
#include "data/sampler.h"
#include "model/ctr_step.h"
#include "model/dlrm_spec.h"
#include "model/model_file.h"
#include "ps/dlrm_export.h"
#include "ps/sparse_table.h"

namespace ferry {
namespace {

nlohmann::json TableStatsJson(const SparseTableStats& s) {
  return {{"rows", s.rows},
          {"pending_ids", s.pending_ids},
          {"rows_created", s.rows_created},
          {"ids_admitted", s.ids_admitted},
          {"updates_dropped", s.updates_dropped},
          {"evicted_ttl", s.evicted_ttl},
          {"evicted_memory", s.evicted_memory},
          {"row_bytes", s.row_bytes},
          {"overhead_bytes", s.overhead_bytes}};
}

struct CtrEval {
  double auc = 0.0;
  double logloss = 0.0;
};

// Scores every test sample, `batch` at a time.
absl::StatusOr<CtrEval> EvaluateCtr(CtrStep& step, const float* params,
                                    EmbeddingRowSource& rows,
                                    const CtrDataset& test, int batch) {
  const int64_t n = test.num_samples();
  std::vector<float> probabilities(n);
  std::vector<int32_t> labels(n);
  std::vector<int64_t> indices;
  CtrBatch staged;
  for (int64_t begin = 0; begin < n; begin += batch) {
    const int64_t b = std::min<int64_t>(batch, n - begin);
    indices.resize(b);
    for (int64_t i = 0; i < b; ++i) {
      indices[i] = begin + i;
      labels[begin + i] = test.label(begin + i);
    }
    RETURN_IF_ERROR(test.GatherBatch(indices, staged));
    RETURN_IF_ERROR(step.Predict(
        staged, params, rows, absl::MakeSpan(probabilities).subspan(begin, b)));
  }
  CtrEval eval;
  ASSIGN_OR_RETURN(eval.auc, BinaryAuc(probabilities, labels));
  ASSIGN_OR_RETURN(eval.logloss, LogLoss(probabilities, labels));
  return eval;
}

}  // namespace

nlohmann::json CtrTrainSummary::ToJson() const {
  nlohmann::json epochs_json = nlohmann::json::array();
  for (const CtrEpochStats& e : per_epoch) {
    epochs_json.push_back({{"epoch", e.epoch},
                           {"train_loss", e.train_loss},
                           {"test_auc", e.test_auc},
                           {"test_logloss", e.test_logloss},
                           {"seconds", e.seconds},
                           {"samples_per_second", e.samples_per_second}});
  }
  nlohmann::json tables = nlohmann::json::array();
  for (const SparseTableStats& t : embedding.tables) {
    tables.push_back(TableStatsJson(t));
  }
  nlohmann::json store = TableStatsJson(embedding.total);
  store["bytes"] = embedding.bytes;
  store["tables"] = std::move(tables);
  return {{"model", "dlrm"},
          {"epochs", epochs},
          {"steps", steps},
          {"wall_seconds", wall_seconds},
          {"samples_per_second", samples_per_second},
          {"test_auc", test_auc},
          {"test_logloss", test_logloss},
          {"final_loss", final_loss},
          {"unique_ids_per_step", unique_ids_per_step},
          {"embedding_rows", embedding_rows},
          {"embedding_admitted", embedding.total.ids_admitted},
          {"embedding_evicted_ttl", embedding.total.evicted_ttl},
          {"embedding_evicted_memory", embedding.total.evicted_memory},
          {"embedding_updates_dropped", embedding.total.updates_dropped},
          {"embedding_bytes", embedding.bytes},
          {"dense_parameters", dense_parameters},
          {"device", device},
          {"embedding", std::move(store)},
          {"per_epoch", std::move(epochs_json)}};
}

absl::StatusOr<CtrTrainSummary> RunCtrStandalone(
    const TrainOptions& options, const EmbeddingOptions& embedding,
    ProgressPrinter& progress) {
  const absl::Time start = absl::Now();
  if (options.batch <= 0 || options.epochs <= 0) {
    return absl::InvalidArgumentError("batch and epochs must be > 0");
  }
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
  RETURN_IF_ERROR(ValidateEmbeddingOptions(embedding));
  ASSIGN_OR_RETURN(DlrmSpec spec, ResolveDlrmSpec(options.model));
  if (spec.dense_features != kCriteoDense ||
      spec.num_fields != kCriteoCategorical) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--model %s has %d dense features and %d categorical fields; Criteo "
        "data (--dataset %s) has %d and %d",
        options.model, spec.dense_features, spec.num_fields, options.dataset,
        kCriteoDense, kCriteoCategorical));
  }
  ASSIGN_OR_RETURN(const std::string dir, ParseCtrDatasetSpec(options.dataset));
  ASSIGN_OR_RETURN(auto backend, MakeBackend(options.device, options.threads));
  ASSIGN_OR_RETURN(CtrStep step, CtrStep::Create(spec, backend.get()));
  CtrTrainTest data;
  if (options.evaluate_only) {  // the test split only: no train.tsv needed
    ASSIGN_OR_RETURN(const std::string test_path, FindCtrFile(dir, "test"));
    ASSIGN_OR_RETURN(data.test, CtrDataset::LoadFile(test_path));
  } else {
    ASSIGN_OR_RETURN(data, LoadCtrTrainTest(dir));
    progress.Line(absl::StrCat("train: ", data.train.load_summary()));
  }
  progress.Line(absl::StrCat("test: ", data.test.load_summary()));

  ASSIGN_OR_RETURN(
      std::unique_ptr<SparseStore> store,
      SparseStore::Create(MakeSparseStoreConfig(
          embedding, std::vector<int32_t>(spec.num_fields, spec.embedding_dim),
          options.seed)));
  SparseStoreRowSource rows(store.get());

  const int64_t n = data.train.num_samples();
  const int64_t steps_per_epoch = (n + options.batch - 1) / options.batch;
  OptimizerConfig opt_config = options.optimizer;
  ResolveScheduleLength(opt_config, steps_per_epoch, options.epochs);
  const size_t num_params = static_cast<size_t>(step.num_params());
  ASSIGN_OR_RETURN(DeviceBuffer params, backend->Allocate(num_params));
  ASSIGN_OR_RETURN(DeviceBuffer grads, backend->Allocate(num_params));
  // --init-from: the directory's dense weights and tables (the store's are
  // replaced), else fresh ones.
  std::vector<float> init;
  if (!options.init_from.empty()) {
    absl::StatusOr<std::vector<float>> imported =
        ImportDlrm(options.init_from, spec, *store);
    if (!imported.ok()) {
      return absl::Status(imported.status().code(),
                          absl::StrCat("--init-from ", options.init_from, ": ",
                                       imported.status().message()));
    }
    init = *std::move(imported);
    progress.Line(absl::StrFormat("init from %s: %d embedding rows",
                                  options.init_from,
                                  store->Stats().total.rows));
  } else {
    init = step.model().InitialParameters(options.seed);
  }
  RETURN_IF_ERROR(
      backend->CopyToDevice(init.data(), num_params, params.data()));
  ASSIGN_OR_RETURN(Optimizer optimizer,
                   Optimizer::Create(opt_config, backend.get(), num_params));

  CtrTrainSummary summary;
  summary.device = backend->Name();
  summary.dense_parameters = static_cast<int64_t>(num_params);
  progress.Line(absl::StrFormat(
      "standalone: DLRM %s (%d dense parameters, %d tables of dim %d), %s, "
      "%d train / %d test samples, batch %d, dense %s lr %g, embeddings %s "
      "lr %g admit %d ttl %d max %d MiB, device %s",
      options.model, num_params, spec.num_fields, spec.embedding_dim,
      options.dataset, n, data.test.num_samples(), options.batch,
      OptimizerKindName(opt_config.kind), opt_config.lr,
      RowOptimizerKindName(embedding.optimizer.kind), embedding.optimizer.lr,
      embedding.admit_count, embedding.ttl_steps, embedding.max_mb,
      summary.device));

  if (options.evaluate_only) {
    ASSIGN_OR_RETURN(CtrEval eval, EvaluateCtr(step, params.data(), rows,
                                               data.test, options.batch));
    progress.Line(
        absl::StrFormat("evaluate only: test auc %.4f  test logloss "
                        "%.4f  %d embedding rows",
                        eval.auc, eval.logloss, store->Stats().total.rows));
    summary.test_auc = eval.auc;
    summary.test_logloss = eval.logloss;
    summary.embedding = store->Stats();
    summary.embedding_rows = summary.embedding.total.rows;
    summary.final_parameters = init;
    summary.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start);
    return summary;
  }
  double train_seconds = 0;
  int64_t trained_samples = 0;
  double unique_ids_sum = 0;
  CtrBatch batch;
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    const absl::Time epoch_start = absl::Now();
    const std::vector<int64_t> order =
        EpochPermutation(n, options.seed, epoch, options.shuffle);
    double loss_sum = 0;
    int64_t seen = 0;
    for (int64_t begin = 0; begin < n; begin += options.batch) {
      if (options.max_steps > 0 && summary.steps >= options.max_steps) break;
      const int b =
          static_cast<int>(std::min<int64_t>(options.batch, n - begin));
      RETURN_IF_ERROR(data.train.GatherBatch(
          absl::MakeConstSpan(order).subspan(begin, b), batch));
      ASSIGN_OR_RETURN(
          CtrStepResult result,
          step.ForwardBackward(batch, params.data(), rows, grads.data()));
      if (!std::isfinite(result.loss_sum)) {
        return absl::InternalError(absl::StrFormat(
            "the training loss diverged at step %d (epoch %d): lower --lr or "
            "--embedding-lr",
            summary.steps, epoch + 1));
      }
      RETURN_IF_ERROR(backend->Scale(num_params, 1.0f / b, grads.data()));
      RETURN_IF_ERROR(optimizer.Apply(grads.data(), params.data()));
      const std::vector<SparseRows>* contribution[] = {&result.rows};
      RETURN_IF_ERROR(store->ApplyStep(contribution, b, summary.steps));
      loss_sum += result.loss_sum;
      unique_ids_sum += static_cast<double>(result.unique_ids);
      seen += b;
      ++summary.steps;
      // A terminal gets a redrawn line every 50 steps; logs get a line at
      // every tenth of a long epoch.
      const int64_t epoch_step = begin / options.batch + 1;
      const bool log_line = !progress.interactive() && steps_per_epoch >= 100 &&
                            epoch_step % (steps_per_epoch / 10) == 0 &&
                            epoch_step < steps_per_epoch;
      if (summary.steps % 50 == 0 || log_line) {
        const std::string text = absl::StrFormat(
            "epoch %d/%d step %d/%d loss %.4f %.0f samples/s", epoch + 1,
            options.epochs, epoch_step, steps_per_epoch, loss_sum / seen,
            seen / std::max(1e-9,
                            absl::ToDoubleSeconds(absl::Now() - epoch_start)));
        if (log_line) {
          progress.Line(text);
        } else {
          progress.Update(static_cast<double>(begin + b) / n, text);
        }
      }
    }
    RETURN_IF_ERROR(backend->Synchronize());
    const double epoch_train_seconds =
        absl::ToDoubleSeconds(absl::Now() - epoch_start);
    train_seconds += epoch_train_seconds;
    trained_samples += seen;
    ASSIGN_OR_RETURN(CtrEval eval, EvaluateCtr(step, params.data(), rows,
                                               data.test, options.batch));
    CtrEpochStats stats;
    stats.epoch = epoch + 1;
    stats.train_loss = seen > 0 ? loss_sum / seen : 0.0;
    stats.test_auc = eval.auc;
    stats.test_logloss = eval.logloss;
    stats.seconds = absl::ToDoubleSeconds(absl::Now() - epoch_start);
    stats.samples_per_second = seen / std::max(1e-9, epoch_train_seconds);
    summary.per_epoch.push_back(stats);
    progress.Line(absl::StrFormat(
        "epoch %2d/%d  loss %.4f  test auc %.4f  test logloss %.4f  %.0f "
        "samples/s  %d embedding rows",
        stats.epoch, options.epochs, stats.train_loss, stats.test_auc,
        stats.test_logloss, stats.samples_per_second,
        store->Stats().total.rows));
    if (options.max_steps > 0 && summary.steps >= options.max_steps) break;
  }
  summary.epochs = static_cast<int>(summary.per_epoch.size());
  summary.test_auc = summary.per_epoch.back().test_auc;
  summary.test_logloss = summary.per_epoch.back().test_logloss;
  summary.final_loss = summary.per_epoch.back().train_loss;
  summary.samples_per_second = trained_samples / std::max(1e-9, train_seconds);
  summary.unique_ids_per_step =
      summary.steps > 0 ? unique_ids_sum / summary.steps : 0.0;
  summary.embedding = store->Stats();
  summary.embedding_rows = summary.embedding.total.rows;
  summary.final_parameters.resize(num_params);
  RETURN_IF_ERROR(backend->CopyToHost(params.data(), num_params,
                                      summary.final_parameters.data()));
  if (!options.export_dir.empty()) {
    RETURN_IF_ERROR(
        ExportDlrm(options.export_dir, spec, summary.final_parameters, *store));
    progress.Line(absl::StrFormat("exported to %s (%d embedding rows)",
                                  options.export_dir, summary.embedding_rows));
  }
  summary.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return summary;
}

}  // namespace ferry

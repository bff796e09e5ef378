#include "worker/train_summary.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ferry {
namespace {

void AddScores(const TestScores& s, nlohmann::json& out) {
  out["test_accuracy"] = s.accuracy;
  out["test_loss"] = s.loss;
  if (s.auc.has_value()) {
    out["test_auc"] = *s.auc;
    out["test_logloss"] = s.loss;
  }
}

}  // namespace

nlohmann::json TrainSummary::ToJson() const {
  nlohmann::json epochs_json = nlohmann::json::array();
  for (const EpochStats& e : per_epoch) {
    nlohmann::json epoch = {{"epoch", e.epoch},
                            {"train_loss", e.train_loss},
                            {"seconds", e.seconds},
                            {"samples_per_second", e.samples_per_second}};
    if (!e.test.auc.has_value()) epoch["train_accuracy"] = e.train_accuracy;
    AddScores(e.test, epoch);
    epochs_json.push_back(std::move(epoch));
  }
  nlohmann::json out = {{"epochs", epochs},
                        {"steps", steps},
                        {"wall_seconds", wall_seconds},
                        {"samples_per_second", samples_per_second},
                        {"final_loss", final_loss},
                        {"device", device},
                        {"per_epoch", std::move(epochs_json)}};
  AddScores(test, out);
  if (test.auc.has_value()) out["unique_ids_per_step"] = unique_ids_per_step;
  if (family.is_object()) {
    for (const auto& [key, value] : family.items()) out[key] = value;
  }
  return out;
}

void RecordEpoch(TrainSummary& summary, const EpochStats& stats, int epochs,
                 ProgressPrinter& progress) {
  summary.per_epoch.push_back(stats);
  const TestScores& t = stats.test;
  std::string scores =
      t.auc.has_value()
          ? absl::StrFormat("test auc %.4f  test logloss %.4f", *t.auc, t.loss)
          : absl::StrFormat("train acc %.4f  test acc %.4f",
                            stats.train_accuracy, t.accuracy);
  std::string line = absl::StrFormat(
      "epoch %2d/%d  loss %.4f  %s  %.0f samples/s", stats.epoch, epochs,
      stats.train_loss, scores, stats.samples_per_second);
  if (t.embedding_rows.has_value()) {
    absl::StrAppend(&line, "  ", *t.embedding_rows, " embedding rows");
  }
  progress.Line(line);
}

}  // namespace ferry

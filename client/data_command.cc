#include "client/data_command.h"

#include <cstdio>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace ferry {

CLI::App* AddDataCtrCommand(CLI::App& data, DataCtrFlags& f) {
  CLI::App* ctr = data.add_subcommand(
      "ctr",
      "generate a CTR data set in the Criteo TSV format (label, I1-I13, "
      "C1-C26) with Zipf-distributed ids and labels from a hidden teacher "
      "whose test AUC (meta.json) is the ceiling");
  ctr->add_option("--out", f.out, "output directory (created)")->required();
  ctr->add_option("--rows", f.generator.rows, "training rows (train.tsv)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  ctr->add_option("--test-rows", f.generator.test_rows, "test rows (test.tsv)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  ctr->add_option("--seed", f.generator.seed, "same seed, same bytes")
      ->capture_default_str();
  ctr->add_option("--zipf", f.generator.zipf_exponent,
                  "Zipf exponent of the ids of every field (> 0)")
      ->capture_default_str();
  ctr->add_option("--vocab-sizes", f.generator.vocab_sizes,
                  "26 per-field vocabulary sizes, comma separated (default: "
                  "Criteo Kaggle's, 3 to 10.1M ids, 33.8M in all)")
      ->delimiter(',');
  ctr->add_option("--teacher-factors", f.generator.teacher_factors,
                  "factor dimension of the teacher's interactions (0: none)")
      ->capture_default_str();
  ctr->add_option("--target-ctr", f.generator.target_ctr,
                  "positive rate the teacher's bias is set for")
      ->capture_default_str();
  ctr->add_flag("--gzip", f.generator.gzip,
                "write train.tsv.gz and test.tsv.gz");
  ctr->add_flag("--quiet", f.quiet, "no progress lines");
  return ctr;
}

int RunDataCtr(const DataCtrFlags& f) {
  const CtrGeneratorOptions& o = f.generator;
  if (absl::Status ok = CheckCtrGeneratorOptions(o); !ok.ok()) {
    std::fprintf(stderr, "ferry data ctr: %s\n",
                 std::string(ok.message()).c_str());
    return 2;
  }
  const absl::Time start = absl::Now();
  int last_percent = -1;
  auto progress = [&](int64_t done, int64_t total) {
    const int percent = static_cast<int>(100 * done / total);
    if (f.quiet || percent / 10 == last_percent / 10) return;
    last_percent = percent;
    const double s = absl::ToDoubleSeconds(absl::Now() - start);
    std::fprintf(stderr,
                 "ferry data ctr: %d%% (%lld of %lld rows, %.0f rows/s)\n",
                 percent, static_cast<long long>(done),
                 static_cast<long long>(total), s > 0 ? done / s : 0.0);
  };
  absl::StatusOr<CtrGeneratedMeta> meta = WriteCtrDataset(f.out, o, progress);
  if (!meta.ok()) {
    std::fprintf(stderr, "ferry data ctr: %s\n",
                 std::string(meta.status().message()).c_str());
    return 1;
  }
  std::printf(
      "wrote %s: %lld training and %lld test rows in %.1f s; positive rate "
      "%.3f (train), %.3f (test); teacher test AUC %.4f, log loss %.4f "
      "(meta.json)\n",
      f.out.c_str(), static_cast<long long>(meta->rows),
      static_cast<long long>(meta->test_rows),
      absl::ToDoubleSeconds(absl::Now() - start), meta->train_positive_rate,
      meta->test_positive_rate, meta->teacher_test_auc,
      meta->teacher_test_logloss);
  return 0;
}

}  // namespace ferry

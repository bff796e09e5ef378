#include "data/dlrm_job_check.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "data/ctr_dataset.h"

namespace ferry {

absl::StatusOr<DlrmSpec> ResolveCriteoDlrm(const std::string& model,
                                           const std::string& dataset) {
  if (!IsCtrDatasetSpec(dataset)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--model ", model,
        " is a DLRM CTR model: it trains on --dataset criteo:DIR (Criteo TSV "
        "files; `ferry data ctr --out DIR` writes some), not '",
        dataset, "'"));
  }
  RETURN_IF_ERROR(ParseCtrDatasetSpec(dataset).status());
  ASSIGN_OR_RETURN(DlrmSpec spec, ResolveDlrmSpec(model));
  if (spec.dense_features != kCriteoDense ||
      spec.num_fields != kCriteoCategorical) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--model %s has %d dense features and %d categorical fields; Criteo "
        "data (--dataset %s) has %d and %d",
        model, spec.dense_features, spec.num_fields, dataset, kCriteoDense,
        kCriteoCategorical));
  }
  return spec;
}

absl::Status CheckDistributedDlrmFlags(const std::string& mode,
                                       const std::string& export_dir,
                                       int64_t ring_full_table_rows,
                                       const EmbeddingOptions& embedding) {
  if (mode == "ring") RETURN_IF_ERROR(CheckRingKeepsEveryRow(embedding));
  if (!export_dir.empty() && ring_full_table_rows > 0) {
    return absl::InvalidArgumentError(
        "--export with --ring-full-table-rows: full tables hold ids mod that "
        "many rows, which an export (rows keyed by id) cannot describe");
  }
  return absl::OkStatus();
}

absl::Status CheckRingKeepsEveryRow(const EmbeddingOptions& embedding) {
  if (embedding.ttl_steps > 0) {
    return absl::InvalidArgumentError(
        "--embedding-ttl-steps: ring mode keeps every row on every member "
        "(a rolled-back step cannot bring evicted rows back); use --mode ps "
        "or --mode hybrid for a TTL");
  }
  if (embedding.max_mb > 0) {
    return absl::InvalidArgumentError(
        "--embedding-max-mb: ring mode keeps every row on every member; use "
        "--mode ps or --mode hybrid for a memory limit");
  }
  return absl::OkStatus();
}

absl::Status CheckFullTableRows(int64_t rows, int64_t floats_per_row) {
  if (rows < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ring-full-table-rows must be >= 0, got ", rows));
  }
  if (rows > (int64_t{1} << 31) || rows * floats_per_row > (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--ring-full-table-rows %d: the tables' gradient would be %d x %d "
        "floats, more than 2^31",
        rows, rows, floats_per_row));
  }
  return absl::OkStatus();
}

absl::Status CheckRingFullTableRows(const std::string& mode, int64_t rows,
                                    const std::string& model,
                                    const DlrmSpec* spec) {
  if (rows != 0 && spec == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--ring-full-table-rows sizes a DLRM's embedding tables; --model ",
        model, " has none"));
  }
  if (spec == nullptr) return absl::OkStatus();
  if (rows > 0 && mode != "ring") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--ring-full-table-rows: --mode ", mode,
        " keeps the tables on the shards; the full-table all-reduce is ring "
        "mode's (--mode ring)"));
  }
  return CheckFullTableRows(rows,
                            int64_t{spec->num_fields} * spec->embedding_dim);
}

absl::Status CheckModeFitsModel(const std::string& mode, bool dlrm,
                                const std::string& model) {
  if (mode != "hybrid" || dlrm) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--mode hybrid puts embedding tables on the shards and dense layers in "
      "the ring: it needs a model with embedding tables (--model dlrm), not ",
      model));
}

absl::Status CheckEmbeddingFlagsFitModel(bool given, bool dlrm,
                                         const std::string& model) {
  if (!given || dlrm) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "the --embedding-* flags configure a DLRM's embedding tables; --model ",
      model,
      " is a dense model (use --model dlrm or a JSON file with \"kind\": "
      "\"dlrm\")"));
}

}  // namespace ferry

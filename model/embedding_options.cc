#include "model/embedding_options.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ferry {
namespace {

absl::Status CheckFinite(const char* field, float value, bool positive) {
  if (!std::isfinite(value) || value < 0.0f || (positive && value == 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("row optimizer %s must be %s and finite, got %g", field,
                        positive ? "> 0" : ">= 0", value));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RowOptimizerKind> ParseRowOptimizerKind(
    const std::string& text) {
  if (text == "sgd") return RowOptimizerKind::kSgd;
  if (text == "adagrad") return RowOptimizerKind::kAdagrad;
  if (text == "ftrl") return RowOptimizerKind::kFtrl;
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown embedding optimizer '%s' (sgd, adagrad, ftrl)", text));
}

std::string RowOptimizerKindName(RowOptimizerKind kind) {
  switch (kind) {
    case RowOptimizerKind::kSgd:
      return "sgd";
    case RowOptimizerKind::kAdagrad:
      return "adagrad";
    case RowOptimizerKind::kFtrl:
      return "ftrl";
  }
  return "unknown";
}

absl::Status ValidateRowOptimizer(const RowOptimizerParams& p) {
  if (absl::Status s = CheckFinite("lr", p.lr, true); !s.ok()) return s;
  if (absl::Status s = CheckFinite("epsilon", p.epsilon, false); !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CheckFinite("initial_accumulator", p.initial_accumulator, false);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckFinite("beta", p.beta, false); !s.ok()) return s;
  if (absl::Status s = CheckFinite("l1", p.l1, false); !s.ok()) return s;
  return CheckFinite("l2", p.l2, false);
}

absl::Status ValidateEmbeddingOptions(const EmbeddingOptions& options) {
  if (absl::Status s = ValidateRowOptimizer(options.optimizer); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--embedding-*: ", s.message()));
  }
  if (options.admit_count < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--embedding-admit-count must be >= 1 (1: every id is "
                     "admitted at once), got ",
                     options.admit_count));
  }
  if (options.ttl_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--embedding-ttl-steps must be >= 0 (0: off), got ",
                     options.ttl_steps));
  }
  if (options.max_mb < 0 || options.max_mb > (int64_t{1} << 40)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--embedding-max-mb must be in [0, 2^40] (0: no limit), "
                     "got ",
                     options.max_mb));
  }
  return absl::OkStatus();
}

absl::StatusOr<EmbeddingOptions> ToEmbeddingOptions(const EmbeddingFlags& f) {
  EmbeddingOptions options;
  absl::StatusOr<RowOptimizerKind> kind = ParseRowOptimizerKind(f.optimizer);
  if (!kind.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--embedding-optimizer: ", kind.status().message()));
  }
  options.optimizer.kind = *kind;
  options.optimizer.lr = static_cast<float>(f.lr);
  options.optimizer.beta = static_cast<float>(f.ftrl_beta);
  options.optimizer.l1 = static_cast<float>(f.ftrl_l1);
  options.optimizer.l2 = static_cast<float>(f.ftrl_l2);
  options.admit_count = f.admit_count;
  options.ttl_steps = f.ttl_steps;
  options.max_mb = f.max_mb;
  if (absl::Status s = ValidateEmbeddingOptions(options); !s.ok()) return s;
  return options;
}

}  // namespace ferry

// PsShard's embedding rows: pushes of row gradients and reads of rows (the
// steps that apply them are in ps_shard.cc and ps_shard_steps.cc).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/byte_sink.h"
#include "common/checkpoint_tables.h"
#include "common/prometheus_metrics.h"
#include "common/status_macros.h"
#include "ps/ps_shard.h"

namespace ferry {
namespace {
absl::Status SparseRejected(absl::string_view op, absl::Status status) {
  return Metrics().Reject(MetricRole::kPs, op, std::move(status));
}
}  // namespace

absl::Status PsShard::AddRows(PsPushStaging& staging, SparseRows rows) {
  if (!staging.error_.ok()) return staging.error_;
  absl::Status status;
  if (sparse_ == nullptr) {
    status = absl::InvalidArgumentError(absl::StrFormat(
        "push from %s carries rows of embedding table %d; job '%s' has no "
        "embedding tables",
        staging.header_.worker_id, rows.table, config_.job_id));
  } else {
    for (const SparseRows& part : staging.rows_) {
      if (part.table == rows.table) {
        status = absl::InvalidArgumentError(absl::StrFormat(
            "embedding table %d appears twice in one push", rows.table));
      }
    }
    if (status.ok()) status = sparse_->CheckRows(absl::MakeConstSpan(&rows, 1));
  }
  if (!status.ok()) {
    staging.error_ = status;
    return RejectPush(std::move(status));
  }
  staging.rows_.push_back(std::move(rows));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> PsShard::ReadRows(
    absl::string_view job_id, absl::Span<const RowsToRead> tables,
    std::vector<std::vector<float>>& out) {
  absl::MutexLock lock(&mu_);
  if (job_id != config_.job_id) {
    return SparseRejected(
        "pull", absl::FailedPreconditionError(
                    absl::StrFormat("row pull for job '%s', this shard serves "
                                    "job '%s'",
                                    job_id, config_.job_id)));
  }
  if (sparse_ == nullptr) {
    return SparseRejected(
        "pull", absl::FailedPreconditionError(absl::StrFormat(
                    "job '%s' has no embedding tables", config_.job_id)));
  }
  std::vector<std::vector<float>> values(tables.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    const RowsToRead& part = tables[i];
    if (part.table < 0 || part.table >= sparse_->num_tables()) {
      return SparseRejected(
          "pull", absl::InvalidArgumentError(
                      absl::StrFormat("embedding table %d does not exist (the "
                                      "job has %d tables)",
                                      part.table, sparse_->num_tables())));
    }
    values[i].resize(part.ids.size() * sparse_->table(part.table).dim());
    if (absl::Status s =
            sparse_->Read(part.table, part.ids, absl::MakeSpan(values[i]));
        !s.ok()) {
      return SparseRejected("pull", std::move(s));
    }
  }
  out = std::move(values);
  return slice_.version();
}

absl::StatusOr<int64_t> PsShard::WriteTablesSection(absl::string_view job_id,
                                                    int64_t min_version,
                                                    ByteSink& sink) {
  if (job_id != config_.job_id) {
    return absl::FailedPreconditionError(
        absl::StrFormat("tables of job '%s' asked of shard %d of job '%s'",
                        job_id, config_.shard_id, config_.job_id));
  }
  if (sparse_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrFormat("shard %d of job '%s' holds no embedding tables",
                        config_.shard_id, config_.job_id));
  }
  absl::MutexLock lock(&mu_);
  if (slice_.version() < min_version) {
    return absl::FailedPreconditionError(
        absl::StrFormat("tables at version %d asked of shard %d at version %d",
                        min_version, config_.shard_id, slice_.version()));
  }
  const std::vector<std::unique_ptr<TablePartSource>> sources =
      sparse_->CheckpointSources();
  std::vector<const TablePartSource*> tables;
  for (const auto& source : sources) tables.push_back(source.get());
  RETURN_IF_ERROR(WriteTables(tables, /*with_counters=*/true, sink));
  return slice_.version();
}

}  // namespace ferry

#include "ps/job_tables.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "proto/job_convert.h"

namespace ferry {

SparseStoreConfig DlrmTablesConfig(const DlrmSpec& spec,
                                   const EmbeddingOptions& embedding,
                                   uint64_t seed, int32_t shard_id,
                                   int32_t num_shards) {
  return MakeSparseStoreConfig(
      embedding, std::vector<int32_t>(spec.num_fields, spec.embedding_dim),
      seed, shard_id, num_shards);
}

absl::StatusOr<SparseStoreConfig> JobTablesConfig(const v1::JobSpec& job,
                                                  int32_t shard_id,
                                                  int32_t num_shards) {
  if (!IsDlrmJob(job)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the job's model '", job.model(), "' has no embedding tables"));
  }
  ASSIGN_OR_RETURN(const DlrmSpec spec, JobDlrmSpec(job));
  absl::StatusOr<EmbeddingOptions> embedding = FromProto(job.embedding());
  if (!embedding.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the job's embedding tables: ", embedding.status().message()));
  }
  return DlrmTablesConfig(spec, *embedding, job.seed(), shard_id, num_shards);
}

}  // namespace ferry

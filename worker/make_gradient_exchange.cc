#include "worker/make_gradient_exchange.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/dlrm_weights.h"
#include "model/model_export.h"
#include "proto/job_convert.h"
#include "ps/job_tables.h"
#include "worker/hybrid_exchange.h"
#include "worker/job_options.h"
#include "worker/ps_exchange.h"
#include "worker/ring_exchange.h"

namespace ferry {

absl::Status CheckExchangeJob(const v1::JobSpec& job) {
  if (job.mode() != v1::MODE_RING && job.shard_addresses_size() == 0) {
    return absl::FailedPreconditionError(
        "the job lists no parameter-server shards");
  }
  return absl::OkStatus();
}

namespace {

// The ring exchange of `context`'s dense buffer, its links from `peer`;
// `with_tables`: and of the job's embedding tables (ring mode's DLRM).
absl::StatusOr<std::unique_ptr<RingExchange>> MakeRingExchange(
    const ExchangeContext& context, PeerEndpoint* peer, bool with_tables,
    bool committed_steps_final) {
  const v1::JobSpec& job = *context.job;
  if (peer == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(ModeName(job.mode()), " job without a peer endpoint"));
  }
  ASSIGN_OR_RETURN(
      RingExchangeOptions options,
      RingExchangeOptionsForJob(job, context.worker_id, *context.layout));
  options.backend = context.backend;
  const std::string job_id = job.job_id();
  options.connect = [peer, job_id](const v1::NextTaskResponse& lease) {
    return peer->Connect(job_id, lease);
  };
  options.publisher = peer->publisher();
  options.counter = peer->counter();
  options.digest_every = job.digest_every();
  options.committed_steps_final = committed_steps_final;
  options.params = context.buffers.params;
  options.grads = context.buffers.grads;
  options.host_grads = context.buffers.host_grads;
  options.collective_timeout = context.collective_timeout;
  // Hybrid: the dense layers' checkpoints (the shards write the tables').
  options.checkpoint_dir = job.ring_checkpoint_dir();
  options.checkpoint_from_rank0 = job.ring_checkpoint_rank0();
  options.shard_optimizer_state = job.ring_shard_optimizer_state();
  // PyTorch workers' steps may leave parameters out (.grad None).
  options.agree_on_absent = job.model_from_worker();
  options.grads_idle_between_steps = context.buffers.grads_idle_between_steps;
  options.lend_published_params =
      context.buffers.params_written_only_by_exchange;
  if (context.ring_prompt_commit_min_bytes >= 0) {
    options.prompt_commit_min_bytes = context.ring_prompt_commit_min_bytes;
  }
  if (with_tables) {
    ASSIGN_OR_RETURN(const SparseStoreConfig tables, JobTablesConfig(job));
    ASSIGN_OR_RETURN(const EmbeddingOptions embedding,
                     FromProto(job.embedding()));
    ASSIGN_OR_RETURN(
        options.tables,
        RingTables::Create(tables.dims, embedding, job.seed(),
                           job.embedding().ring_full_table_rows()));
    if (!job.init_from().empty()) {  // an export's or a checkpoint's tables
      RETURN_IF_ERROR(options.tables->LoadInitTables(
          job.init_from(), context.layout->total_elements()));
    }
  }
  return RingExchange::Create(std::move(options));
}

}  // namespace

absl::StatusOr<std::unique_ptr<GradientExchange>> MakeGradientExchange(
    const ExchangeContext& context, PeerEndpoint* peer,
    const ParameterClientFactory& parameter_client) {
  const v1::JobSpec& job = *context.job;
  RETURN_IF_ERROR(CheckExchangeJob(job));
  if (job.mode() == v1::MODE_RING) {
    ASSIGN_OR_RETURN(std::unique_ptr<RingExchange> ring,
                     MakeRingExchange(context, peer, IsDlrmJob(job),
                                      /*committed_steps_final=*/true));
    return std::unique_ptr<GradientExchange>(std::move(ring));
  }
  if (!parameter_client) {
    return absl::InvalidArgumentError(
        absl::StrCat(ModeName(job.mode()), " job without a parameter client"));
  }
  if (job.mode() == v1::MODE_HYBRID) {
    if (!IsDlrmJob(job)) {
      return absl::InvalidArgumentError(
          "hybrid mode needs a model with embedding tables (a DLRM)");
    }
    ASSIGN_OR_RETURN(std::unique_ptr<RingExchange> ring,
                     MakeRingExchange(context, peer, /*with_tables=*/false,
                                      /*committed_steps_final=*/false));
    // The shards hold no dense chunk in hybrid mode: a client of rows only.
    ASSIGN_OR_RETURN(
        std::unique_ptr<ParameterClient> rows,
        parameter_client(job, context.worker_id, ParameterLayout()));
    return std::unique_ptr<GradientExchange>(
        std::make_unique<HybridExchange>(std::move(ring), std::move(rows)));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ParameterClient> client,
                   parameter_client(job, context.worker_id, *context.layout));
  return std::unique_ptr<GradientExchange>(std::make_unique<PsExchange>(
      std::move(client), context.backend, context.buffers,
      context.shard_check_timeout, /*embedding_tables=*/IsDlrmJob(job),
      job.pipeline_stages() > 1 ? PipelinePsPolicy() : ExchangePolicy{}));
}

}  // namespace ferry

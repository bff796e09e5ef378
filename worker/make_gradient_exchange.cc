#include "worker/make_gradient_exchange.h"

#include <utility>

#include "common/status_macros.h"
#include "proto/job_convert.h"
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

absl::StatusOr<std::unique_ptr<GradientExchange>> MakeGradientExchange(
    const ExchangeContext& context, PeerEndpoint* peer,
    const ParameterClientFactory& parameter_client) {
  const v1::JobSpec& job = *context.job;
  RETURN_IF_ERROR(CheckExchangeJob(job));
  if (job.mode() == v1::MODE_RING) {
    if (IsDlrmJob(job)) {
      return absl::InvalidArgumentError(
          "ring mode cannot train a DLRM yet (its embedding tables live on PS "
          "shards): use --mode ps");
    }
    if (peer == nullptr) {
      return absl::InvalidArgumentError("ring job without a peer endpoint");
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
    options.params = context.buffers.params;
    options.grads = context.buffers.grads;
    options.host_grads = context.buffers.host_grads;
    options.collective_timeout = context.collective_timeout;
    ASSIGN_OR_RETURN(std::unique_ptr<RingExchange> ring,
                     RingExchange::Create(std::move(options)));
    return std::unique_ptr<GradientExchange>(std::move(ring));
  }
  if (!parameter_client) {
    return absl::InvalidArgumentError("PS job without a parameter client");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ParameterClient> client,
                   parameter_client(job, context.worker_id, *context.layout));
  return std::unique_ptr<GradientExchange>(std::make_unique<PsExchange>(
      std::move(client), context.backend, context.buffers,
      context.shard_check_timeout, /*embedding_tables=*/IsDlrmJob(job)));
}

}  // namespace ferry

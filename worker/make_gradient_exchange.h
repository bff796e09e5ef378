// The one place that picks a job's GradientExchange
// (worker/gradient_exchange.h) from its mode; the training loop calls it once,
// after Register.
#ifndef FERRY_WORKER_MAKE_GRADIENT_EXCHANGE_H_
#define FERRY_WORKER_MAKE_GRADIENT_EXCHANGE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "compute/compute_backend.h"
#include "ferry/v1/coordinator.pb.h"
#include "model/parameter_layout.h"
#include "worker/gradient_exchange.h"
#include "worker/worker_deps.h"

namespace ferry {

// What every mode's exchange is built over. Pointers are not owned and
// must outlive the exchange.
struct ExchangeContext {
  const v1::JobSpec* job = nullptr;
  std::string worker_id;
  // The job's flat buffer (model/model_params.h ModelJobLayout).
  const ParameterLayout* layout = nullptr;
  ComputeBackend* backend = nullptr;
  ExchangeBuffers buffers;
  // Ring: deadline of one collective (a bucket or the broadcast).
  absl::Duration collective_timeout = absl::Seconds(30);
  // PS: deadline of the ShardInfo calls after a timed-out step.
  absl::Duration shard_check_timeout = absl::Seconds(2);
  // Ring: RingExchangeOptions.prompt_commit_min_bytes (-1: its default).
  int64_t ring_prompt_commit_min_bytes = -1;
};

// FAILED_PRECONDITION when the job cannot be trained by any exchange (a PS
// job without shards). Cheap; called before data and model are loaded.
absl::Status CheckExchangeJob(const v1::JobSpec& job);

// MODE_RING: a RingExchange whose links come from `peer` (required), with
// the job's embedding tables (worker/ring_tables.h) for a DLRM;
// MODE_PS: a PsExchange over `parameter_client`'s client (required);
// MODE_HYBRID (DLRM jobs only): a HybridExchange of both, the client built
// over an empty layout (the shards hold only the embedding tables).
// Errors: CheckExchangeJob's; INVALID_ARGUMENT for a missing factory or
// endpoint, bad buckets, optimizer or compression; the factory's.
absl::StatusOr<std::unique_ptr<GradientExchange>> MakeGradientExchange(
    const ExchangeContext& context, PeerEndpoint* peer,
    const ParameterClientFactory& parameter_client);

}  // namespace ferry

#endif  // FERRY_WORKER_MAKE_GRADIENT_EXCHANGE_H_

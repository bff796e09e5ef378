// The options of a worker's PS client and ring exchange that follow from its
// job alone (ids, placement, optimizer, compression). The worker sets the
// rest: buffers, backend, peer service, timeouts, link emulation.
#ifndef FERRY_WORKER_JOB_OPTIONS_H_
#define FERRY_WORKER_JOB_OPTIONS_H_

#include <string>

#include "absl/status/statusor.h"
#include "ferry/v1/coordinator.pb.h"
#include "model/parameter_layout.h"
#include "ps/ps_client.h"
#include "worker/ring_exchange.h"

namespace ferry {

// Job id, worker id, the shards' addresses and the chunks of `layout` placed
// on them (max_chunk_elements, or kDefaultMaxChunkElements when 0), and the
// compression. Errors are PlaceChunks's (e.g. RESOURCE_EXHAUSTED past the
// peer limits).
absl::StatusOr<GrpcParameterClientOptions> ParameterClientOptionsForJob(
    const v1::JobSpec& job, const std::string& worker_id,
    const ParameterLayout& layout);

// Job id, worker id, the tensor sizes of `layout` (the job's flat buffer,
// model/model_params.h ModelJobLayout) of which the last JobStateElements(job)
// are BatchNorm state, the bucket size (bucket_elements, or one bucket of
// the whole model when 0), optimizer and compression.
// Errors: JobStateElements'.
absl::StatusOr<RingExchangeOptions> RingExchangeOptionsForJob(
    const v1::JobSpec& job, const std::string& worker_id,
    const ParameterLayout& layout);

}  // namespace ferry

#endif  // FERRY_WORKER_JOB_OPTIONS_H_

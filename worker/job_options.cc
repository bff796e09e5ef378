#include "worker/job_options.h"

#include "common/sharding.h"
#include "common/status_macros.h"
#include "proto/job_convert.h"

namespace ferry {

absl::StatusOr<GrpcParameterClientOptions> ParameterClientOptionsForJob(
    const v1::JobSpec& job, const std::string& worker_id,
    const ParameterLayout& layout) {
  GrpcParameterClientOptions options;
  options.job_id = job.job_id();
  // assign(), not =: gcc 12 -O2 reports a false -Wmaybe-uninitialized.
  options.worker_id.assign(worker_id.data(), worker_id.size());
  options.shard_addresses.assign(job.shard_addresses().begin(),
                                 job.shard_addresses().end());
  ASSIGN_OR_RETURN(options.chunks, JobChunks(job, layout));
  options.compression = FromProto(job.compression());
  // BatchNorm state chunks travel uncompressed.
  ASSIGN_OR_RETURN(const int64_t state, JobStateElements(job));
  if (state > 0) options.uncompressed_from = layout.total_elements() - state;
  return options;
}

absl::StatusOr<RingExchangeOptions> RingExchangeOptionsForJob(
    const v1::JobSpec& job, const std::string& worker_id,
    const ParameterLayout& layout) {
  RingExchangeOptions options;
  options.job_id = job.job_id();
  options.worker_id = worker_id;
  options.tensor_sizes = layout.TensorSizes();
  ASSIGN_OR_RETURN(options.state_elements, JobStateElements(job));
  options.bucket_elements = job.bucket_elements() > 0 ? job.bucket_elements()
                                                      : layout.total_elements();
  ASSIGN_OR_RETURN(options.optimizer, JobOptimizer(job));
  options.compression = FromProto(job.compression());
  return options;
}

}  // namespace ferry
